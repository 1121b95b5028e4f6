//! [`call`]: one request to a Streamable HTTP server, start to finish.

use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{CallOptions, Client, ConnectOptions, Error, ServerConfig};

/// The bound of [`call`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait for the session's `DELETE` after the answer.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

/// Sends one request (`method` with `params`) to the Streamable HTTP
/// server at `url` and returns its result, parsed as `T` (use
/// [`serde_json::Value`] for the raw JSON): the `initialize` handshake
/// first (the server's session, if it makes one, is used and then ended
/// with `DELETE`), JSON or SSE answers, everything within 30 s.
///
/// ```no_run
/// use mcpwire_blocking::types::CallToolResult;
/// use serde_json::json;
///
/// let r: CallToolResult = mcpwire_blocking::call(
///     "http://127.0.0.1:3000/mcp",
///     "tools/call",
///     json!({"name": "echo", "arguments": {"message": "hi"}}),
/// )?;
/// # Ok::<(), mcpwire_blocking::Error>(())
/// ```
pub fn call<T: DeserializeOwned>(url: &str, method: &str, params: Value) -> Result<T, Error> {
    call_timeout(url, method, params, DEFAULT_CALL_TIMEOUT)
}

/// [`call`] with a bound on the whole exchange (handshake and request;
/// the session's `DELETE` afterwards waits at most 1 s more). The errors
/// are those of [`Client`]: [`Error::Connect`] when the handshake failed
/// or timed out (with the HTTP status and text), [`Error::is_timeout`]
/// when the request did, [`Error::remote`] for the server's JSON-RPC
/// error, [`Error::Decode`] when the result is not a `T`.
pub fn call_timeout<T: DeserializeOwned>(
    url: &str,
    method: &str,
    params: Value,
    timeout: Duration,
) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    let options = ConnectOptions::new()
        .timeout(timeout)
        // The core's own initialize timeout fires first, with the clearer
        // message (`initialize failed: Request timeout after …`).
        .connect_timeout(timeout + Duration::from_millis(250))
        .config(|c| {
            // One request: no stream for server-initiated messages.
            c.http.listen = false;
            c.http.listen_settle = Duration::ZERO;
            c.http.close_timeout = CLOSE_LIMIT;
        });
    let client = Client::connect_with(ServerConfig::http(url), options)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let params = if params.is_null() {
        None
    } else {
        Some(&params)
    };
    let result = client.request(method, params, CallOptions::new().timeout(left));
    let _ = client.close_timeout(CLOSE_LIMIT);
    result
}
