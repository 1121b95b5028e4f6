//! HTTP request headers of the modern Streamable HTTP transport: every POST
//! carries `MCP-Protocol-Version` (equal to `_meta`'s version) and
//! `Mcp-Method`; `tools/call` and `prompts/get` add `Mcp-Name: params.name`,
//! `resources/read` adds `Mcp-Name: params.uri`; a tool's `inputSchema`
//! properties marked `x-mcp-header: X` are mirrored as `Mcp-Param-X`.
//! Values outside printable ASCII, with edge whitespace, or looking like
//! the sentinel are sent as `=?base64?…?=`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::meta::declared_version;
use crate::mcp::methods::MethodId;

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION_HEADER: &str = "MCP-Protocol-Version";
/// `Mcp-Method`: the JSON-RPC method.
pub const METHOD_HEADER: &str = "Mcp-Method";
/// `Mcp-Name`: `params.name` or `params.uri`.
pub const NAME_HEADER: &str = "Mcp-Name";
/// Prefix of the headers mirrored from `x-mcp-header` tool parameters.
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";
/// The schema keyword that designates a mirrored parameter.
pub const X_MCP_HEADER: &str = "x-mcp-header";

/// The params member mirrored as `Mcp-Name` for `method`, if any (the
/// method table's `header_param`: `name` of `tools/call` and
/// `prompts/get`, `uri` of `resources/read`, and, in the tasks extension,
/// `taskId`, which routes a task's requests to its instance).
pub fn name_source(method: &str) -> Option<&'static str> {
    MethodId::of(method).and_then(|m| m.spec().header_param)
}

/// Why headers could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The method itself is not header-safe (a method name is sent verbatim).
    #[error("method {0:?} cannot be sent as a header value")]
    UnsafeMethod(String),
    /// `params._meta` lacks the protocol version.
    #[error("params._meta has no io.modelcontextprotocol/protocolVersion")]
    NoVersion,
    /// The version is not header-safe.
    #[error("protocol version {0:?} cannot be sent as a header value")]
    UnsafeVersion(String),
    /// A method that needs `Mcp-Name` lacks a string `params.name`/`uri`.
    #[error("{method} needs a string params.{field}")]
    MissingName {
        /// The method.
        method: String,
        /// `name` or `uri`.
        field: &'static str,
    },
    /// An `x-mcp-header` annotation breaks the spec's constraints: the tool
    /// MUST be left out of `tools/list`.
    #[error("invalid x-mcp-header annotation: {0}")]
    InvalidAnnotation(String),
}

/// The standard headers for a modern POST of `method` with `params`
/// (`MCP-Protocol-Version` from `params._meta`, `Mcp-Method`, `Mcp-Name`).
///
/// ```
/// use mcpwire::modern::request_headers;
/// let params = serde_json::json!({"name": "get_weather",
///     "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
/// let h = request_headers("tools/call", &params).unwrap();
/// assert_eq!(h, [("MCP-Protocol-Version", "2026-07-28".to_string()),
///                ("Mcp-Method", "tools/call".to_string()),
///                ("Mcp-Name", "get_weather".to_string())]);
/// ```
pub fn request_headers(
    method: &str,
    params: &Value,
) -> Result<Vec<(&'static str, String)>, HeaderError> {
    let version = declared_version(params).ok_or(HeaderError::NoVersion)?;
    if !is_plain(version) {
        return Err(HeaderError::UnsafeVersion(version.to_string()));
    }
    if !is_plain(method) || method.is_empty() {
        return Err(HeaderError::UnsafeMethod(method.to_string()));
    }
    let mut headers = vec![
        (PROTOCOL_VERSION_HEADER, version.to_string()),
        (METHOD_HEADER, method.to_string()),
    ];
    if let Some(field) = name_source(method) {
        let name =
            params
                .get(field)
                .and_then(Value::as_str)
                .ok_or_else(|| HeaderError::MissingName {
                    method: method.to_string(),
                    field,
                })?;
        headers.push((NAME_HEADER, encode_header_value(name)));
    }
    Ok(headers)
}

/// True when `v` can travel verbatim: printable ASCII 0x20–0x7E (tab and
/// controls excluded, as the Python SDK and the conformance suite do), no
/// leading or trailing space, not shaped like the sentinel.
fn is_plain(v: &str) -> bool {
    v.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && v.trim_matches(' ') == v
        && !(v.starts_with("=?base64?") && v.ends_with("?="))
}

/// A header value: verbatim when safe, else `=?base64?<standard base64 of
/// the UTF-8>?=`.
///
/// ```
/// use mcpwire::modern::encode_header_value;
/// assert_eq!(encode_header_value("us-west1"), "us-west1");
/// assert_eq!(encode_header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
/// ```
pub fn encode_header_value(v: &str) -> String {
    if is_plain(v) {
        v.to_string()
    } else {
        format!("=?base64?{}?=", base64(v.as_bytes()))
    }
}

/// The text of a header value: an `=?base64?…?=` one decoded (`None` if
/// its base64 or UTF-8 is broken), any other as it is.
///
/// ```
/// use mcpwire::modern::decode_header_value;
/// assert_eq!(decode_header_value("us-west1").as_deref(), Some("us-west1"));
/// assert_eq!(decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(), Some("Hello, 世界"));
/// assert_eq!(decode_header_value("=?base64?*?="), None);
/// ```
pub fn decode_header_value(v: &str) -> Option<String> {
    let Some(b64) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return Some(v.to_owned());
    };
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = b64.trim_end_matches('=').as_bytes();
    if b64.len() % 4 != 0 || b64.len() - body.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= digit(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    String::from_utf8(out).ok()
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One `x-mcp-header` annotation: the header name part and the property
/// path (chain of `properties` keys) it mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The `x-mcp-header` value (`Region` → `Mcp-Param-Region`).
    pub name: String,
    /// The argument path.
    pub path: Vec<String>,
}

/// Bound on schema nesting walked for annotations.
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// Reads and validates a tool's `x-mcp-header` annotations. An `Err` means
/// the tool is invalid and MUST be excluded from `tools/list` (HTTP only).
///
/// Checked: non-empty RFC 9110 token; case-insensitively unique; only on
/// `string`/`integer`/`boolean` properties; only reachable through a chain
/// of `properties` (an annotation under `items`, `oneOf`, `$defs`, … is
/// invalid).
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, HeaderError> {
    let mut found = Vec::new();
    walk(input_schema, Some(Vec::new()), 0, &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for h in &found {
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(HeaderError::InvalidAnnotation(format!(
                "duplicate {:?}",
                h.name
            )));
        }
    }
    Ok(found)
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn walk(
    schema: &Value,
    path: Option<Vec<String>>,
    depth: usize,
    found: &mut Vec<ParamHeader>,
) -> Result<(), HeaderError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(HeaderError::InvalidAnnotation(
            "schema nested too deeply".into(),
        ));
    }
    let Some(obj) = schema.as_object() else {
        return Ok(());
    };
    if let Some(ann) = obj.get(X_MCP_HEADER) {
        let name = ann
            .as_str()
            .ok_or_else(|| HeaderError::InvalidAnnotation("not a string".into()))?;
        if !is_token(name) {
            return Err(HeaderError::InvalidAnnotation(format!(
                "{name:?} is not a header token"
            )));
        }
        let ty = obj.get("type").and_then(Value::as_str);
        if !matches!(ty, Some("string" | "integer" | "boolean")) {
            return Err(HeaderError::InvalidAnnotation(format!(
                "{name:?} is on a non-primitive property"
            )));
        }
        match &path {
            Some(p) if !p.is_empty() => found.push(ParamHeader {
                name: name.to_string(),
                path: p.clone(),
            }),
            _ => {
                return Err(HeaderError::InvalidAnnotation(format!(
                    "{name:?} is not reachable through properties alone"
                )))
            }
        }
    }
    for (key, value) in obj {
        match key.as_str() {
            "properties" => {
                if let Some(props) = value.as_object() {
                    for (prop, sub) in props {
                        let next = path.as_ref().map(|p| {
                            let mut p = p.clone();
                            p.push(prop.clone());
                            p
                        });
                        walk(sub, next, depth + 1, found)?;
                    }
                }
            }
            // Data, not schemas: never look inside.
            "default" | "examples" | "const" | "enum" | X_MCP_HEADER => {}
            _ => match value {
                // One schema (`items`, `not`, …) or a map of schemas
                // (`$defs`, `patternProperties`, …): walking it as a schema
                // also visits every member, all off the `properties` chain.
                Value::Object(_) => walk(value, None, depth + 1, found)?,
                Value::Array(items) => {
                    for sub in items {
                        walk(sub, None, depth + 1, found)?;
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// The `Mcp-Param-*` headers for a call: one per annotation whose argument
/// is present and not `null` (strings verbatim, integers in decimal,
/// booleans `true`/`false`, each encoded with [`encode_header_value`]).
pub fn param_header_values(
    annotations: &[ParamHeader],
    arguments: &Map<String, Value>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for a in annotations {
        let mut cur: Option<&Value> = None;
        let mut map = Some(arguments);
        for key in &a.path {
            cur = map.and_then(|m| m.get(key));
            map = cur.and_then(Value::as_object);
        }
        let text = match cur {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => continue,
        };
        out.push((
            format!("{PARAM_HEADER_PREFIX}{}", a.name),
            encode_header_value(&text),
        ));
    }
    out
}

/// Each tool's `x-mcp-header` annotations, as `tools/list` declared them
/// (their calls mirror those arguments in `Mcp-Param-*` headers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHeaders {
    by_tool: HashMap<String, Vec<ParamHeader>>,
}

impl ToolHeaders {
    /// Tools recorded at most; beyond, new ones are not.
    pub const MAX_TOOLS: usize = 10_000;

    /// Records the annotations of tool `name` (none: forgets it).
    pub fn record(&mut self, name: &str, headers: Vec<ParamHeader>) {
        if headers.is_empty() {
            self.by_tool.remove(name);
        } else if self.by_tool.len() < Self::MAX_TOOLS || self.by_tool.contains_key(name) {
            self.by_tool.insert(name.to_owned(), headers);
        }
    }

    /// The annotations of tool `name`, if any.
    pub fn get(&self, name: &str) -> Option<&[ParamHeader]> {
        self.by_tool.get(name).map(Vec::as_slice)
    }
}

/// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` of one outgoing message of
/// `method` with `params`, computed where the message is built and sent
/// with its POST in the 2026-07-28 era (the transport adds
/// `MCP-Protocol-Version`). Lenient, unlike [`request_headers`]: a missing
/// name is left out, never an error.
///
/// ```
/// use mcpwire::modern::{message_headers, ToolHeaders};
/// let params = serde_json::json!({"name": "get weather", "arguments": {}});
/// let h = message_headers("tools/call", Some(&params), &ToolHeaders::default());
/// assert_eq!(h, [("Mcp-Method".to_string(), "tools/call".to_string()),
///                ("Mcp-Name".into(), "get weather".into())]);
/// ```
pub fn message_headers(
    method: &str,
    params: Option<&Value>,
    tools: &ToolHeaders,
) -> Vec<(String, String)> {
    let mut h = vec![(METHOD_HEADER.to_owned(), encode_header_value(method))];
    let id = MethodId::of(method);
    let Some(field) = id.and_then(|m| m.spec().header_param) else {
        return h;
    };
    let Some(name) = params.and_then(|p| p.get(field)).and_then(Value::as_str) else {
        return h;
    };
    h.push((NAME_HEADER.to_owned(), encode_header_value(name)));
    let specs = tools.get(name).filter(|_| id == Some(MethodId::CallTool));
    let args = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object);
    if let (Some(specs), Some(args)) = (specs, args) {
        h.extend(param_header_values(specs, args));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Value {
        let mut v = v;
        v["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        v
    }

    #[test]
    fn standard_headers() {
        let h = request_headers("tools/list", &p(json!({}))).unwrap();
        assert_eq!(
            h,
            [
                (PROTOCOL_VERSION_HEADER, "2026-07-28".into()),
                (METHOD_HEADER, "tools/list".into())
            ]
        );
        let h = request_headers(
            "resources/read",
            &p(json!({"uri": "file:///path/to/file%20name.txt"})),
        )
        .unwrap();
        assert_eq!(
            h[2],
            (NAME_HEADER, "file:///path/to/file%20name.txt".into())
        );
        let h = request_headers("prompts/get", &p(json!({"name": "my-hyphenated-tool"}))).unwrap();
        assert_eq!(h[2].1, "my-hyphenated-tool");
        let h = request_headers("tools/call", &p(json!({"name": "日本"}))).unwrap();
        assert!(h[2].1.starts_with("=?base64?"));
        let h = request_headers("server/discover", &p(json!({}))).unwrap();
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            request_headers("tools/list", &json!({})),
            Err(HeaderError::NoVersion)
        );
        assert!(matches!(
            request_headers("tools/call", &p(json!({}))),
            Err(HeaderError::MissingName { field: "name", .. })
        ));
        assert!(matches!(
            request_headers("a\nb", &p(json!({}))),
            Err(HeaderError::UnsafeMethod(_))
        ));
        let bad = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "x\r\ny"}});
        assert!(matches!(
            request_headers("tools/list", &bad),
            Err(HeaderError::UnsafeVersion(_))
        ));
    }

    #[test]
    fn spec_encoding_examples() {
        // The table in basic/transports/streamable-http.mdx "Value Encoding".
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_header_value("line1\nline2"),
            "=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(
            encode_header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode_header_value("us west 1"), "us west 1");
        assert_eq!(encode_header_value(""), "");
        assert_eq!(encode_header_value("\tindented"), "=?base64?CWluZGVudGVk?=");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn custom_param_headers() {
        let schema = json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "priority":{"type":"integer","x-mcp-header":"Priority"},
            "verbose":{"type":"boolean","x-mcp-header":"Verbose"},
            "method_val":{"type":"string","x-mcp-header":"Method"},
            "float_val":{"type":"number"},
            "nested":{"type":"object","properties":{"z":{"type":"string","x-mcp-header":"Zone"}}},
            "query":{"type":"string","default":{"x-mcp-header":"Ignored"}}}});
        let ann = param_headers(&schema).unwrap();
        assert_eq!(ann.len(), 5);
        let args = json!({"region":"us-west1","priority":42,"verbose":null,"method_val":"m",
            "float_val":3.5,"nested":{"z":"Hello, 世界"},"query":"SELECT 1"});
        let mut h = param_header_values(&ann, args.as_object().unwrap());
        h.sort();
        assert_eq!(
            h,
            [
                ("Mcp-Param-Method".to_string(), "m".to_string()),
                ("Mcp-Param-Priority".into(), "42".into()),
                ("Mcp-Param-Region".into(), "us-west1".into()),
                (
                    "Mcp-Param-Zone".into(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".into()
                ),
            ]
        );
    }

    #[test]
    fn message_headers_of_each_kind_of_message() {
        let mut tools = ToolHeaders::default();
        let schema = json!({"properties":{"region":{"type":"string","x-mcp-header":"Region"}}});
        tools.record("weather", param_headers(&schema).unwrap());
        let call = json!({"name":"weather","arguments":{"region":"eu"}});
        assert_eq!(
            message_headers("tools/call", Some(&call), &tools),
            [
                (METHOD_HEADER.to_owned(), "tools/call".to_owned()),
                (NAME_HEADER.into(), "weather".into()),
                ("Mcp-Param-Region".into(), "eu".into()),
            ]
        );
        // Only tools/call mirrors arguments; a missing name is left out.
        let get = json!({"name":"weather","arguments":{"region":"eu"}});
        assert_eq!(message_headers("prompts/get", Some(&get), &tools).len(), 2);
        assert_eq!(message_headers("tools/call", None, &tools).len(), 1);
        assert_eq!(
            message_headers("notifications/cancelled", None, &tools),
            [(
                METHOD_HEADER.to_owned(),
                "notifications/cancelled".to_owned()
            )]
        );
        tools.record("weather", Vec::new());
        assert!(tools.get("weather").is_none());
    }

    #[test]
    fn invalid_annotations_reject_the_tool() {
        // The conformance suite's http-invalid-tool-headers cases.
        let cases = [
            json!({"properties":{"v":{"type":"string","x-mcp-header":""}}}),
            json!({"properties":{"v":{"type":"object","x-mcp-header":"O"}}}),
            json!({"properties":{"v":{"type":"array","x-mcp-header":"A"}}}),
            json!({"properties":{"v":{"type":"null","x-mcp-header":"N"}}}),
            json!({"properties":{"v":{"type":"number","x-mcp-header":"F"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"X"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"My Header"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"My:Header"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"Héader"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"A\u{1}"}}}),
            json!({"properties":{"v":{"type":"array","items":{"type":"string","x-mcp-header":"I"}}}}),
            json!({"oneOf":[{"properties":{"v":{"type":"string","x-mcp-header":"O"}}}]}),
            json!({"$defs":{"d":{"type":"string","x-mcp-header":"D"}}}),
            json!({"type":"string","x-mcp-header":"Root"}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":7}}}),
        ];
        for c in cases {
            assert!(param_headers(&c).is_err(), "{c}");
        }
        assert_eq!(
            param_headers(
                &json!({"properties":{"region":{"type":"string","x-mcp-header":"Region"}}})
            )
            .unwrap()
            .len(),
            1
        );
        assert!(param_headers(&json!(true)).unwrap().is_empty());
        // Deep nesting is bounded, not a stack overflow.
        let mut deep = json!({"type":"string"});
        for _ in 0..200 {
            deep = json!({"properties":{"a": deep}});
        }
        assert!(param_headers(&deep).is_err());
    }
}
