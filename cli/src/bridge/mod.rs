//! `mcpwire bridge TARGET`: serves MCP on stdin/stdout to a host that
//! speaks stdio only, and relays everything to TARGET (`--url`, `--sse`,
//! `--server NAME`, `-- cmd args`) through the mcpwire client, which
//! brings its own era negotiation, re-initialize, resume, proxies, CAs and
//! OAuth to the host.
//!
//! ```text
//!  host ──stdin──► ServerSession (core) ──► requests ──► Client::request_raw ──► target
//!       ◄─stdout──        ▲   ▲                                   │
//!                         │   └── server-to-client requests ◄─────┤ (roots, sampling, elicitation)
//!                         └────── notifications, progress   ◄─────┘
//! ```
//!
//! - The target is connected by the host's first `initialize`,
//!   `server/discover` or 2026-07-28 request (whichever comes first),
//!   declaring the host's own capabilities (so the target asks only what
//!   the host answers; a 2026-07-28 host declares its own request by
//!   request, so those that promise answers are all declared and each of
//!   the target's requests goes to a request declaring it, see
//!   [`modern_host`]); `initialize` and `server/discover`
//!   are answered with the target's capabilities, identity and
//!   instructions. Over stdio the connect runs in a task of its own:
//!   the host is served meanwhile, what needs the target waits for it,
//!   and a failed connect answers it with -32603 naming the target (see
//!   `stdio`). Each side speaks its own era: the host either
//!   (`initialize`, or 2026-07-28 requests with their `_meta` envelope and
//!   `server/discover`, judged by core's [`ServerSession`]), the target
//!   either (probed by the client). A 2026-07-28 target's results reach a
//!   host of the handshake era without that era's `resultType`; a
//!   handshake target's reach a 2026-07-28 host stamped as that era's
//!   (`resultType`, caching hints). The host's envelope is not relayed
//!   (the client puts its own on a 2026-07-28 target's requests).
//! - Tasks pass through when host and target speak the same era; across
//!   eras the host is offered none (see [`init_result`]).
//! - A 2026-07-28 host cannot be sent requests: the target's requests
//!   (roots, sampling, elicitation) reach it as input rounds of its
//!   request in flight that declares it answers them (`input_required`,
//!   see [`rounds`]), over stdio and `--listen`.
//! - Requests run concurrently; the host's `notifications/cancelled`
//!   cancels the relayed call (the target is told); progress is relayed
//!   under the host's token.
//! - `--allow-tool` / `--deny-tool` (globs, `*` and `?`) filter
//!   `tools/list`; a filtered tool's call is refused with -32602 and never
//!   reaches the target. A `--server` entry's tool list applies too.
//! - A target that fails, times out or goes away answers each request
//!   with a JSON-RPC error; nothing waits forever. When the host closes
//!   stdin, the target is closed (a stdio target's process stopped) and
//!   the bridge exits 0.

mod listen;
mod listens;
mod rounds;
mod stdio;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use mcpwire::mcp::handshake::SUPPORTED_PROTOCOL_VERSIONS;
use mcpwire::mcp::methods::{notifications, MethodId, ServerRequestKind};
use mcpwire::mcp::types::TASKS_EXTENSION;
use mcpwire::modern::meta::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSION_KEY,
};
use mcpwire::modern::{
    param_headers, Era, ParamHeader, HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION,
};
use mcpwire::rpc::RequestId;
use mcpwire::server::{ServerEvent, ServerSession};
use mcpwire_manager::ToolFilter;
use mcpwire_tokio::types::ClientCapabilities;
use mcpwire_tokio::{
    CallError, CallOptions, CancelToken, Client, Error, ErrorObject, Handler, RequestError,
};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use self::listens::{ack, through_listens, Filter, Listens};
use self::rounds::Rounds;
use crate::args::{Cli, Fail};
use crate::target::{connect_options, Target};

/// A relayed request's time limit when `--timeout` is not given: long
/// tool calls pass, a target that never answers still ends in an error.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Messages for the host waiting to be written, at most.
const QUEUE: usize = 1024;
/// The JSON-RPC code of a request that timed out (as the SDKs use it).
const REQUEST_TIMEOUT: i64 = -32001;

/// Which tools the host may see and call, and the `x-mcp-header`
/// annotations of those the target listed (a 2026-07-28 call over HTTP
/// mirrors them in `Mcp-Param-*` headers, which `--listen` checks).
pub(crate) struct Tools {
    allow: Vec<String>,
    deny: Vec<String>,
    entry: ToolFilter,
    marks: std::sync::Mutex<std::collections::HashMap<String, Vec<ParamHeader>>>,
}

impl Tools {
    pub(crate) fn new(allow: &[String], deny: &[String], entry: ToolFilter) -> Self {
        Tools {
            allow: allow.to_vec(),
            deny: deny.to_vec(),
            entry,
            marks: Default::default(),
        }
    }

    /// The `x-mcp-header` annotations of tool `name`, as the target's last
    /// `tools/list` page naming it declared them (`None`: not listed yet).
    pub(crate) fn marks(&self, name: &str) -> Option<Vec<ParamHeader>> {
        self.marks.lock().expect("lock").get(name).cloned()
    }

    /// Notes the annotations of each tool of a `tools/list` page (a tool
    /// whose annotations break the spec's rules gets none: nobody can
    /// mirror them).
    fn record_marks(&self, page: &Value) {
        let Some(tools) = page.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut marks = self.marks.lock().expect("lock");
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            let found = t
                .get("inputSchema")
                .and_then(|s| param_headers(s).ok())
                .unwrap_or_default();
            marks.insert(name.to_owned(), found);
        }
    }

    /// Allowed: by the entry's list, by some `--allow-tool` (when any is
    /// given), and by no `--deny-tool`.
    pub(crate) fn allows(&self, name: &str) -> bool {
        self.entry.allows(name)
            && (self.allow.is_empty() || self.allow.iter().any(|g| glob(g, name)))
            && !self.deny.iter().any(|g| glob(g, name))
    }

    /// A `tools/list` result with the tools the host may not see taken out.
    pub(super) fn filter_list(&self, raw: Box<RawValue>) -> Box<RawValue> {
        let Ok(mut page) = serde_json::from_str::<Value>(raw.get()) else {
            return raw;
        };
        self.record_marks(&page);
        let Some(tools) = page.get_mut("tools").and_then(Value::as_array_mut) else {
            return raw;
        };
        let before = tools.len();
        tools.retain(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| self.allows(n))
        });
        if tools.len() == before {
            return raw;
        }
        serde_json::value::to_raw_value(&page).unwrap_or(raw)
    }
}

/// `*` matches any run of characters, `?` any one; the rest literally.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative match with one backtrack point (the last `*`).
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

pub(crate) use listen::listen;
pub(crate) use stdio::bridge;

pub(super) fn timeout(cli: &Cli) -> Duration {
    cli.timeout.map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// A call the bridge refuses itself: a tool the host may not call.
pub(super) fn refuse(
    tools: &Tools,
    method: &str,
    params: Option<&RawValue>,
) -> Option<ErrorObject> {
    if method != MethodId::CallTool.name() {
        return None;
    }
    let name = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|v| Some(v.get("name")?.as_str()?.to_owned()))
        .unwrap_or_default();
    (!tools.allows(&name)).then(|| ErrorObject::new(-32602, format!("Unknown tool: {name}")))
}

/// Connects the target for a host whose `initialize` params are `params`:
/// its capabilities are declared, and the requests they promise are sent
/// on to the host. The options are made at once; the connect is the
/// future returned (it borrows nothing: a task may run it).
pub(super) fn connect(
    cli: &Cli,
    target: &Target,
    params: &Value,
    ask: impl Fn(ServerRequestKind) -> Handler,
) -> Pin<Box<dyn Future<Output = Result<Client, String>> + Send>> {
    let caps: ClientCapabilities = params
        .get("capabilities")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let options = match connect_options(cli, &target.config, target.pins.clone()) {
        Ok(options) => options.timeout(timeout(cli)),
        Err(f) => return Box::pin(std::future::ready(Err(f.message))),
    };
    let mut options = options;
    if let Some(info) = params.get("clientInfo") {
        let name = info.get("name").and_then(Value::as_str).unwrap_or("host");
        let version = info.get("version").and_then(Value::as_str).unwrap_or("");
        options = options.client_info(format!("{name} via mcpwire-bridge"), version);
    }
    let declared = serde_json::to_value(&caps).unwrap_or_default();
    for kind in ServerRequestKind::HANDLED {
        let Some(key) = capability_key(kind) else {
            continue;
        };
        if declared.get(key).is_some() {
            options = options.handler(kind, ask(kind));
        }
    }
    // Exactly the host's capabilities (sub-capabilities too), not the
    // handlers' defaults.
    options = options.config(move |c| c.client.capabilities = caps);
    let label = target.label.clone().unwrap_or_else(|| "the target".into());
    let config = target.config.clone();
    Box::pin(async move {
        Client::connect_with(config, options)
            .await
            .map_err(|e| format!("cannot connect {label}: {e}"))
    })
}

/// The host's `initialize` (or `server/discover`) answer: the target's
/// capabilities, identity and instructions, for a host of era `host`.
/// Tasks are offered only when both sides speak the same era: across
/// eras their shapes differ (the capability, `ttl` or `ttlMs`, where the
/// result is), so the other era's task capability is left out, and a
/// call the host still makes a task runs to its end in the client and is
/// answered inline.
pub(super) fn init_result(client: &Client, host: Era) -> Value {
    let server = client.server();
    let mut caps = serde_json::to_value(&server.capabilities).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut caps {
        match host {
            Era::Legacy => {
                if let Some(Value::Object(ext)) = map.get_mut("extensions") {
                    ext.remove(TASKS_EXTENSION);
                    if ext.is_empty() {
                        map.remove("extensions");
                    }
                }
            }
            Era::Modern => {
                map.remove("tasks");
            }
        }
    }
    let mut result = json!({
        "capabilities": caps,
        "serverInfo": server.server_info,
    });
    if let Some(i) = &server.instructions {
        result["instructions"] = Value::String(i.clone());
    }
    result
}

/// How one request of the host is relayed.
pub(super) struct Relay {
    /// The target.
    pub client: Client,
    /// What the host may see and call.
    pub tools: Arc<Tools>,
    /// Cancels the relayed call (the host's `notifications/cancelled`).
    pub token: CancelToken,
    /// The relayed call's time limit.
    pub timeout: Duration,
    /// The era of the host's request.
    pub host: Era,
}

/// One request of the host, relayed: without the host's envelope, its
/// progress under the host's token, cancelled with the token; the answer
/// in the host's era's shape, a `tools/list` page without the tools the
/// host may not see.
pub(super) async fn relay_call(
    call: Relay,
    method: &str,
    params: Option<Box<RawValue>>,
    progress: impl Fn(Box<RawValue>) + Send + Sync + 'static,
) -> Result<Box<RawValue>, ErrorObject> {
    let Relay {
        client,
        tools,
        token,
        timeout,
        host,
    } = call;
    // A 2026-07-28 host in front of a 2026-07-28 target: the request goes
    // on with the host's envelope, and an input round is the host's to
    // answer (its retry carries the target's requestState on).
    let same_era = host == Era::Modern && speaks_modern(&client);
    let params = match host {
        Era::Modern if !same_era => without_envelope(params),
        _ => params,
    };
    let mut options = CallOptions::new().cancel_token(token).timeout(timeout);
    if same_era {
        options = options.relay();
    }
    let progress_token = params
        .as_deref()
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|v| v.get("_meta")?.get("progressToken").cloned());
    if let Some(host_token) = progress_token {
        options = options.on_progress(move |p| {
            let mut params = json!({"progressToken": host_token, "progress": p.progress});
            if let Some(total) = p.total {
                params["total"] = json!(total);
            }
            if let Some(message) = &p.message {
                params["message"] = json!(message);
            }
            if let Ok(params) = serde_json::value::to_raw_value(&params) {
                progress(params);
            }
        });
    }
    let raw = client
        .request_raw(method, params, options)
        .await
        .map_err(error_object)
        .map_err(|e| match e.code {
            // The target refused the headers or the version of the
            // bridge's own request: nothing the host can mend (its own
            // were checked already), and no 400 for it.
            HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION => ErrorObject::internal(format!(
                "the target refused the relayed request: {} ({})",
                e.message, e.code
            )),
            _ => e,
        })?;
    // A 2026-07-28 host's result is stamped by its ServerSession (or the
    // listener) as that era's.
    let raw = if host == Era::Legacy && speaks_modern(&client) {
        handshake_shape(raw)
    } else {
        raw
    };
    Ok(if method == MethodId::ListTools.name() {
        tools.filter_list(raw)
    } else {
        raw
    })
}

/// `initialize`-like params for connecting the target for 2026-07-28
/// hosts, the first of which declared `capabilities` (and `info`). With
/// `asks`, the capabilities that promise answers to the target's requests
/// are all declared: each is put to a request whose own envelope declares
/// it ([`accepts`]), or refused; without, none is.
pub(super) fn modern_host(capabilities: &Value, info: Option<Value>, asks: bool) -> Value {
    let mut caps = capabilities.clone();
    if let Value::Object(map) = &mut caps {
        for key in ServerRequestKind::HANDLED
            .into_iter()
            .filter_map(capability_key)
        {
            if asks {
                map.entry(key).or_insert_with(|| json!({}));
            } else {
                map.remove(key);
            }
        }
    }
    let mut params = json!({ "capabilities": caps });
    if let Some(info) = info {
        params["clientInfo"] = info;
    }
    params
}

/// [`modern_host`] of a 2026-07-28 request's envelope.
pub(super) fn modern_host_of(params: Option<&RawValue>, asks: bool) -> Value {
    let meta = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|mut v| v.get_mut("_meta").map(Value::take))
        .unwrap_or_default();
    let caps = meta
        .get(CLIENT_CAPABILITIES_KEY)
        .cloned()
        .unwrap_or_default();
    modern_host(&caps, meta.get(CLIENT_INFO_KEY).cloned(), asks)
}

/// The target's requests a 2026-07-28 request's envelope says its host
/// answers: the capability keys (`roots`, `sampling`, `elicitation`).
pub(super) fn accepts(params: Option<&RawValue>) -> Vec<&'static str> {
    let caps = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|mut v| {
            v.get_mut("_meta")?
                .get_mut(CLIENT_CAPABILITIES_KEY)
                .map(Value::take)
        })
        .unwrap_or_default();
    ServerRequestKind::HANDLED
        .into_iter()
        .filter_map(capability_key)
        .filter(|k| caps.get(k).is_some())
        .collect()
}

/// A 2026-07-28 host's params without its envelope (`_meta`'s protocol
/// keys; an emptied `_meta` goes too).
fn without_envelope(params: Option<Box<RawValue>>) -> Option<Box<RawValue>> {
    let raw = params?;
    if !raw.get().contains(PROTOCOL_VERSION_KEY) {
        return Some(raw);
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(raw.get()) else {
        return Some(raw);
    };
    if let Some(Value::Object(meta)) = map.get_mut("_meta") {
        for key in [
            PROTOCOL_VERSION_KEY,
            CLIENT_CAPABILITIES_KEY,
            CLIENT_INFO_KEY,
            LOG_LEVEL_KEY,
        ] {
            meta.remove(key);
        }
        if meta.is_empty() {
            map.remove("_meta");
        }
    }
    serde_json::value::to_raw_value(&map).ok().or(Some(raw))
}

/// The client capability that says the host answers `kind`.
pub(super) fn capability_key(kind: ServerRequestKind) -> Option<&'static str> {
    match kind {
        ServerRequestKind::ListRoots => Some("roots"),
        ServerRequestKind::CreateMessage => Some("sampling"),
        ServerRequestKind::Elicit => Some("elicitation"),
        _ => None,
    }
}

/// Whether the target speaks the 2026-07-28 era.
fn speaks_modern(client: &Client) -> bool {
    !SUPPORTED_PROTOCOL_VERSIONS.contains(&client.protocol_version())
}

/// A 2026-07-28 result in the handshake era's shape: without the
/// `resultType` that era does not have.
fn handshake_shape(raw: Box<RawValue>) -> Box<RawValue> {
    if !raw.get().contains("\"resultType\"") {
        return raw;
    }
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Object(mut map)) => {
            map.remove("resultType");
            serde_json::value::to_raw_value(&map).unwrap_or(raw)
        }
        _ => raw,
    }
}

/// The JSON-RPC error the host gets for a failed relay: the target's own
/// error unchanged, else what happened.
pub(super) fn error_object(e: Error) -> ErrorObject {
    match e {
        Error::Request(RequestError::Remote(e)) => e,
        Error::Request(RequestError::Timeout { ms }) => ErrorObject::new(
            REQUEST_TIMEOUT,
            format!("the target did not answer within {ms} ms"),
        ),
        Error::Call(CallError::NotSupported { method, capability }) => ErrorObject::new(
            -32601,
            format!("{method}: the target does not declare {capability}"),
        ),
        e => ErrorObject::internal(format!("target: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, n, m) in [
            ("*", "anything", true),
            ("echo", "echo", true),
            ("echo", "echo2", false),
            ("get_*", "get_weather", true),
            ("get_*", "set_weather", false),
            ("*_admin", "drop_admin", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*a*b*", "xxaybzz", true),
            ("*a*b*", "xxbyazz", false),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(glob(p, n), m, "{p} vs {n}");
        }
    }

    #[test]
    fn allow_and_deny() {
        let t = Tools::new(
            &["get_*".into(), "echo".into()],
            &["get_secret".into()],
            ToolFilter::default(),
        );
        assert!(t.allows("echo"));
        assert!(t.allows("get_weather"));
        assert!(!t.allows("get_secret"));
        assert!(!t.allows("add"));
        let raw = serde_json::value::to_raw_value(
            &json!({"tools":[{"name":"echo"},{"name":"add"},{"name":"get_secret"}],"nextCursor":"c"}),
        )
        .unwrap();
        let v: Value = serde_json::from_str(t.filter_list(raw).get()).unwrap();
        assert_eq!(v, json!({"tools":[{"name":"echo"}],"nextCursor":"c"}));
        assert!(refuse(
            &t,
            "tools/call",
            Some(&serde_json::value::to_raw_value(&json!({"name":"add"})).unwrap())
        )
        .is_some());
        assert!(refuse(
            &t,
            "tools/call",
            Some(&serde_json::value::to_raw_value(&json!({"name":"echo"})).unwrap())
        )
        .is_none());
        assert!(refuse(&t, "tools/list", None).is_none());
    }
}
