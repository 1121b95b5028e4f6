//! Era detection for a dual-era client: is the server modern (2026-07-28)
//! or legacy (`initialize` handshake)? Pure decisions over what came back.
//!
//! ```text
//!   stdio: server/discover ──► DiscoverResult sharing a version ─► Modern(v)
//!                          ──► -32022 naming a version we speak ─► RetryModern(v)
//!                          ──► -32022 naming none we speak ──────► Incompatible (or Legacy if it lists handshake versions)
//!                          ──► any other error / timeout / junk ─► Legacy
//!   HTTP:  first modern POST ─► 2xx ─────────────────────────────► Modern
//!                            ─► 4xx with a modern JSON-RPC error ─► by code (retry / fix / fail)
//!                            ─► 4xx otherwise (empty, -32600, 404 page) ─► Legacy (then maybe HTTP+SSE)
//! ```
//!
//! The verdict is a property of the server: cache it per process (stdio) or
//! origin (HTTP) and re-probe only when it later fails.

use super::discover::{select_version, DiscoverResult};
use super::errors::ModernError;

/// Which protocol era a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28 and later: per-request `_meta`, no sessions.
    Modern,
    /// 2025-11-25 and earlier: `initialize` handshake.
    Legacy,
}

/// Which protocol era(s) a connection may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EraPolicy {
    /// Probe with `server/discover`; fall back to `initialize` (the spec's
    /// backward-compatibility rules).
    #[default]
    Auto,
    /// Only the `initialize` handshake (2025-11-25 and earlier).
    Legacy,
    /// Only 2026-07-28; a legacy server is an error.
    Modern,
}

impl EraPolicy {
    /// `auto`, `legacy` or `modern` (as in a server entry's `protocolEra`).
    pub fn parse(s: &str) -> Option<EraPolicy> {
        match s {
            "auto" => Some(EraPolicy::Auto),
            "legacy" | "2025-11-25" => Some(EraPolicy::Legacy),
            "modern" | "2026-07-28" => Some(EraPolicy::Modern),
            _ => None,
        }
    }
}

/// What to do after a probe.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ProbeVerdict {
    /// Modern server; use this version from now on.
    Modern {
        /// The chosen version.
        version: String,
        /// The discover result, when the probe was `server/discover`.
        discovered: Option<Box<DiscoverResult>>,
    },
    /// Modern server that refused our version but serves this one: resend
    /// the probe (or the request) with it. Do this once; a second refusal is
    /// [`ProbeVerdict::Incompatible`].
    RetryModern {
        /// The version to retry with.
        version: String,
    },
    /// Legacy server: send `initialize`.
    Legacy,
    /// Modern server we share no version with, or that rejected the request
    /// for a reason the client must fix (`-32020`, `-32021`): surface it.
    Incompatible(String),
}

/// What the stdio probe produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StdioProbeOutcome<'a> {
    /// The raw `result` of `server/discover`.
    Result(&'a str),
    /// A JSON-RPC error: code, message, raw data.
    Error {
        /// The code.
        code: i64,
        /// The message.
        message: &'a str,
        /// The raw `data`, if any.
        data: Option<&'a str>,
    },
    /// No answer within the probe timeout (or the stream closed).
    Timeout,
}

/// Decides the era from the stdio `server/discover` probe.
///
/// `ours` are our modern versions (newest first), `legacy` our handshake
/// versions, `first_attempt` false after one [`ProbeVerdict::RetryModern`].
/// Fallback is never keyed to one error code: anything that is not
/// positive modern evidence means legacy.
pub fn stdio_probe_verdict(
    outcome: StdioProbeOutcome<'_>,
    ours: &[&str],
    legacy: &[&str],
    first_attempt: bool,
) -> ProbeVerdict {
    match outcome {
        StdioProbeOutcome::Timeout => ProbeVerdict::Legacy,
        StdioProbeOutcome::Result(raw) => match DiscoverResult::parse(raw) {
            Ok(d) => match d.select(ours) {
                Some(version) => ProbeVerdict::Modern {
                    version,
                    discovered: Some(Box::new(d)),
                },
                // Answers discover but advertises no modern version (e.g. a
                // stateful go-sdk server): a legacy advertisement.
                None => ProbeVerdict::Legacy,
            },
            Err(_) => ProbeVerdict::Legacy,
        },
        StdioProbeOutcome::Error {
            code,
            message,
            data,
        } => {
            match ModernError::from_parts(code, message, data) {
                Some(ModernError::UnsupportedProtocolVersion { supported, .. }) => {
                    unsupported(&supported, ours, legacy, first_attempt)
                }
                // -32020/-32021 cannot answer a bare discover on stdio; read
                // them as modern evidence all the same.
                Some(e @ ModernError::MissingRequiredClientCapability { .. })
                | Some(e @ ModernError::HeaderMismatch { .. }) => {
                    ProbeVerdict::Incompatible(format!("server/discover refused: {e:?}"))
                }
                None => ProbeVerdict::Legacy,
            }
        }
    }
}

fn unsupported(
    supported: &[String],
    ours: &[&str],
    legacy: &[&str],
    first_attempt: bool,
) -> ProbeVerdict {
    match select_version(ours, supported) {
        Some(version) if first_attempt => ProbeVerdict::RetryModern { version },
        _ if supported.iter().any(|s| legacy.contains(&s.as_str())) => ProbeVerdict::Legacy,
        _ => {
            ProbeVerdict::Incompatible(format!(
            "server supports protocol versions {}, none of which this client speaks (it speaks {})",
            supported.join(", "),
            ours.iter().chain(legacy).copied().collect::<Vec<_>>().join(", ")
        ))
        }
    }
}

/// Bound on an HTTP error body read for a modern error.
pub const MAX_PROBE_BODY: usize = 64 * 1024;

/// Decides the era from the HTTP answer to the first modern POST (with
/// `MCP-Protocol-Version`, `Mcp-Method`, `_meta`).
///
/// `status` 2xx = modern (the result or error inside is the request's
/// own). 4xx: a recognised modern error body decides by code; anything else
/// (empty, HTML, `-32600 Missing session ID`, `-32601` with 404/405 from a
/// legacy-only server…) is legacy. 401/403 are authorization, not an era
/// verdict: the caller handles them first. 5xx says nothing: `None`.
pub fn http_probe_verdict(
    status: u16,
    body: &[u8],
    version_sent: &str,
    ours: &[&str],
    legacy: &[&str],
    first_attempt: bool,
) -> Option<ProbeVerdict> {
    match status {
        200..=299 => Some(ProbeVerdict::Modern {
            version: version_sent.to_string(),
            discovered: None,
        }),
        401 | 403 => None,
        400..=499 => Some(match ModernError::from_body(body, MAX_PROBE_BODY) {
            Some(ModernError::UnsupportedProtocolVersion { supported, .. }) => {
                unsupported(&supported, ours, legacy, first_attempt)
            }
            Some(e) => ProbeVerdict::Incompatible(format!("HTTP {status}: {e:?}")),
            None if status == 404 && is_modern_method_not_found(body) => ProbeVerdict::Modern {
                version: version_sent.to_string(),
                discovered: None,
            },
            None => ProbeVerdict::Legacy,
        }),
        _ => None,
    }
}

/// A modern server answers an unknown method with 404 *and* a JSON-RPC
/// `-32601` carrying the request's id; a legacy HTTP+SSE server's 404 has
/// no such body. (A legacy Streamable HTTP server rejects the session-less
/// POST with 400 before looking at the method.)
fn is_modern_method_not_found(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Resp {
        id: Option<serde_json::Value>,
        error: Err,
    }
    #[derive(serde::Deserialize)]
    struct Err {
        code: i64,
    }
    if body.len() > MAX_PROBE_BODY {
        return false;
    }
    matches!(
        serde_json::from_slice::<Resp>(body),
        Ok(Resp { id: Some(id), error: Err { code: -32601 } }) if !id.is_null()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &[&str] = &["2026-07-28"];
    const LEGACY: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
    const PY_DISCOVER: &str = r#"{"cacheScope":"private","capabilities":{"tools":{"listChanged":true}},"resultType":"complete","supportedVersions":["2026-07-28"],"ttlMs":0}"#;

    fn stdio(o: StdioProbeOutcome<'_>) -> ProbeVerdict {
        stdio_probe_verdict(o, OURS, LEGACY, true)
    }

    #[test]
    fn stdio_modern() {
        match stdio(StdioProbeOutcome::Result(PY_DISCOVER)) {
            ProbeVerdict::Modern {
                version,
                discovered,
            } => {
                assert_eq!(version, "2026-07-28");
                assert!(discovered.unwrap().capabilities.tools.is_some());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stdio_legacy_on_anything_else() {
        // Python on a legacy connection / without _meta; TS server-everything.
        for (code, msg) in [
            (-32601, "Method not found"),
            (-32602, "x"),
            (-32600, "era"),
            (-32000, "x"),
            (-1, "x"),
        ] {
            assert_eq!(
                stdio(StdioProbeOutcome::Error {
                    code,
                    message: msg,
                    data: None
                }),
                ProbeVerdict::Legacy
            );
        }
        assert_eq!(stdio(StdioProbeOutcome::Timeout), ProbeVerdict::Legacy);
        assert_eq!(stdio(StdioProbeOutcome::Result("[]")), ProbeVerdict::Legacy);
        assert_eq!(
            stdio(StdioProbeOutcome::Result(
                r#"{"supportedVersions":["2025-11-25"]}"#
            )),
            ProbeVerdict::Legacy
        );
        // -32022 without a usable list is not modern evidence.
        assert_eq!(
            stdio(StdioProbeOutcome::Error {
                code: -32022,
                message: "x",
                data: Some("{}")
            }),
            ProbeVerdict::Legacy
        );
    }

    #[test]
    fn stdio_unsupported_version() {
        let data = r#"{"supported":["2026-07-28"],"requested":"2099-01-01"}"#;
        let e = StdioProbeOutcome::Error {
            code: -32022,
            message: "u",
            data: Some(data),
        };
        assert_eq!(
            stdio(e.clone()),
            ProbeVerdict::RetryModern {
                version: "2026-07-28".into()
            }
        );
        assert!(matches!(
            stdio_probe_verdict(e, OURS, LEGACY, false),
            ProbeVerdict::Incompatible(_)
        ));
        let only_future = r#"{"supported":["2099-01-01"],"requested":"2026-07-28"}"#;
        match stdio(StdioProbeOutcome::Error {
            code: -32022,
            message: "u",
            data: Some(only_future),
        }) {
            ProbeVerdict::Incompatible(m) => assert!(m.contains("2099-01-01"), "{m}"),
            other => panic!("{other:?}"),
        }
        let with_legacy = r#"{"supported":["2099-01-01","2025-11-25"],"requested":"2026-07-28"}"#;
        assert_eq!(
            stdio(StdioProbeOutcome::Error {
                code: -32022,
                message: "u",
                data: Some(with_legacy)
            }),
            ProbeVerdict::Legacy
        );
    }

    fn http(status: u16, body: &str) -> Option<ProbeVerdict> {
        http_probe_verdict(status, body.as_bytes(), "2026-07-28", OURS, LEGACY, true)
    }

    #[test]
    fn http_verdicts() {
        assert!(matches!(http(200, "{}"), Some(ProbeVerdict::Modern { .. })));
        assert!(matches!(http(202, ""), Some(ProbeVerdict::Modern { .. })));
        // Python's legacy path for a POST without MCP-Protocol-Version.
        assert_eq!(
            http(
                400,
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Missing session ID"}}"#
            ),
            Some(ProbeVerdict::Legacy)
        );
        assert_eq!(http(400, ""), Some(ProbeVerdict::Legacy));
        assert_eq!(http(404, "Not Found"), Some(ProbeVerdict::Legacy));
        assert_eq!(http(405, ""), Some(ProbeVerdict::Legacy));
        // Python modern: unknown method = 404 + -32601 with the id.
        assert!(matches!(
            http(
                404,
                r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"Method not found"}}"#
            ),
            Some(ProbeVerdict::Modern { .. })
        ));
        assert_eq!(
            http(
                400,
                r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32022,"message":"u","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}}"#
            ),
            Some(ProbeVerdict::RetryModern {
                version: "2026-07-28".into()
            })
        );
        assert!(matches!(
            http(
                400,
                r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32020,"message":"mcp-method header does not match"}}"#
            ),
            Some(ProbeVerdict::Incompatible(_))
        ));
        assert_eq!(http(401, ""), None);
        assert_eq!(http(403, ""), None);
        assert_eq!(http(500, ""), None);
        assert_eq!(http(302, ""), None);
    }
}
