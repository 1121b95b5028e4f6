//! SEP-2243 on the server's side: a `tools/call` over HTTP mirrors the
//! arguments its tool marks `x-mcp-header: X` in `Mcp-Param-X` headers
//! (verbatim, or `=?base64?…?=`), and the server checks each against the
//! body, as it checks `Mcp-Name`.
//!
//! ```text
//!  tool's inputSchema ──modern::param_headers──► [ParamHeader]
//!  [ParamHeader] + arguments + the POST's headers ──check_param_headers──► Ok | -32020 (HTTP 400)
//! ```

use serde_json::{Map, Value};

use crate::modern::headers::PARAM_HEADER_PREFIX;
use crate::modern::{decode_header_value, ParamHeader, HEADER_MISMATCH};
use crate::rpc::ErrorObject;

/// The `Mcp-Param-*` headers of a POST of `tools/call` with `arguments`,
/// for a tool whose `x-mcp-header` annotations are `annotations`
/// (`header` reads one header, by lowercase name). Each annotated argument
/// the body gives must come with its header, whose value (verbatim, or
/// `=?base64?…?=` with valid base64 of UTF-8) is the argument's text; a
/// header without its argument in the body is refused too. A refusal is
/// -32020 (header mismatch: HTTP 400).
///
/// ```
/// use mcpwire::modern::param_headers;
/// use mcpwire::server::check_param_headers;
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {
///     "region": {"type": "string", "x-mcp-header": "Region"}}});
/// let marks = param_headers(&schema).unwrap();
/// let args = json!({"region": "Hello"});
/// let args = args.as_object();
/// let ok = |h: &str| (h == "mcp-param-region").then_some("=?base64?SGVsbG8=?=");
/// assert!(check_param_headers(&marks, args, ok).is_ok());
/// let missing = |_: &str| None;
/// assert_eq!(check_param_headers(&marks, args, missing).unwrap_err().code, -32020);
/// let bad = |h: &str| (h == "mcp-param-region").then_some("=?base64?SGVsbG8?=");
/// assert!(check_param_headers(&marks, args, bad).is_err());
/// ```
pub fn check_param_headers<'h>(
    annotations: &[ParamHeader],
    arguments: Option<&Map<String, Value>>,
    header: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), ErrorObject> {
    let mismatch = |why: String| Err(ErrorObject::new(HEADER_MISMATCH, why));
    for a in annotations {
        let name = format!("{PARAM_HEADER_PREFIX}{}", a.name);
        let got = header(&name.to_ascii_lowercase());
        let arg = a.path.join(".");
        let body = argument(arguments, &a.path);
        let Some(got) = got else {
            // Mirrored as the client side mirrors (strings, booleans,
            // integers): a number written as a float need not be.
            if matches!(body, Some(Value::String(_) | Value::Bool(_)))
                || body.is_some_and(|v| v.is_i64() || v.is_u64())
            {
                return mismatch(format!(
                    "header mismatch: {name} is missing (its argument {arg} is in the body)"
                ));
            }
            continue;
        };
        let Some(got) = decode_header_value(got) else {
            return mismatch(format!(
                "header mismatch: {name} is not valid =?base64?…?= (padding, alphabet or UTF-8)"
            ));
        };
        let same = match body {
            None | Some(Value::Null | Value::Array(_) | Value::Object(_)) => {
                return mismatch(format!(
                    "header mismatch: {name} is sent but its argument {arg} is not in the body"
                ))
            }
            Some(Value::String(s)) => got == *s,
            Some(Value::Bool(b)) => got == b.to_string(),
            // An integer, also when written as a float (3.0 is 3).
            Some(Value::Number(n)) => {
                got == n.to_string()
                    || (n.is_f64()
                        && n.as_f64().is_some_and(|f| f.fract() == 0.0)
                        && got.parse::<f64>().ok() == n.as_f64())
            }
        };
        if !same {
            return mismatch(format!(
                "header mismatch: {name} does not match the body's {arg}"
            ));
        }
    }
    Ok(())
}

/// The argument at `path` (a chain of object members), if the body has it.
fn argument<'a>(arguments: Option<&'a Map<String, Value>>, path: &[String]) -> Option<&'a Value> {
    let (last, parents) = path.split_last()?;
    let mut map = arguments?;
    for key in parents {
        map = map.get(key)?.as_object()?;
    }
    map.get(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modern::param_headers;
    use serde_json::json;

    fn marks() -> Vec<ParamHeader> {
        param_headers(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "deep": {"type": "object", "properties": {
                "on": {"type": "boolean", "x-mcp-header": "On"}}}}}))
        .unwrap()
    }

    fn check(args: Value, headers: &[(&str, &str)]) -> Result<(), ErrorObject> {
        let h = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        check_param_headers(&marks(), args.as_object(), h)
    }

    #[test]
    fn each_marked_argument_needs_its_matching_header() {
        let all = [
            ("mcp-param-region", "us"),
            ("mcp-param-n", "3"),
            ("mcp-param-on", "true"),
        ];
        assert!(check(json!({"region": "us", "n": 3, "deep": {"on": true}}), &all).is_ok());
        // Literal values: a base64-looking text without the wrapper is text.
        assert!(check(
            json!({"region": "SGVsbG8="}),
            &[("mcp-param-region", "SGVsbG8=")]
        )
        .is_ok());
        assert!(check(
            json!({"region": "=?base64?SGVsbG8="}),
            &[("mcp-param-region", "=?base64?SGVsbG8=")]
        )
        .is_ok());
        // Non-ASCII through base64.
        assert!(check(
            json!({"region": "Hello, 世界"}),
            &[("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?=")]
        )
        .is_ok());
        // Nothing marked in the body, no header: fine.
        assert!(check(json!({}), &[]).is_ok());
        assert!(check(Value::Null, &[]).is_ok());
    }

    #[test]
    fn missing_extra_broken_and_different_headers_are_a_mismatch() {
        let refused = |args: Value, headers: &[(&str, &str)]| {
            let e = check(args, headers).unwrap_err();
            assert_eq!(e.code, HEADER_MISMATCH, "{e:?}");
            e.message
        };
        assert!(refused(json!({"region": "us"}), &[]).contains("missing"));
        assert!(refused(json!({}), &[("mcp-param-region", "us")]).contains("not in the body"));
        assert!(refused(
            json!({"region": "Hello"}),
            &[("mcp-param-region", "=?base64?SGVsbG8?=")]
        )
        .contains("base64"));
        assert!(refused(
            json!({"region": "Hello"}),
            &[("mcp-param-region", "=?base64?SGVs!!!bG8=?=")]
        )
        .contains("base64"));
        assert!(refused(json!({"region": "us"}), &[("mcp-param-region", "eu")]).contains("match"));
        assert!(refused(json!({"n": 3}), &[("mcp-param-n", "4")]).contains("match"));
        assert!(refused(json!({"n": 3.5}), &[("mcp-param-n", "3")]).contains("match"));
        assert!(refused(json!({"on": true}), &[("mcp-param-on", "true")]).contains("not in"));
    }

    #[test]
    fn an_integer_written_as_a_float_matches_its_integer_header_or_none() {
        assert!(check(json!({"n": 3.0}), &[("mcp-param-n", "3")]).is_ok());
        assert!(check(json!({"n": 3.0}), &[]).is_ok());
        assert!(check(json!({"n": 3.0}), &[("mcp-param-n", "3.0")]).is_ok());
        assert!(check(json!({"n": -0.0}), &[("mcp-param-n", "0")]).is_ok());
        assert!(check(json!({"n": 3.0}), &[("mcp-param-n", "4")]).is_err());
    }
}
