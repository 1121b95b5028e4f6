//! Which era a connection speaks: the policy, the remembered hint, the
//! `server/discover` probe and its verdict.
//!
//! ```text
//!  new ─► server/discover (probe) ─ DiscoverResult ─────────────► Modern (the era's sub-state)
//!              │ -32022 naming a version we speak ─► Again: probe again (once)
//!              ├ any other error, a 4xx ─► Handshake: initialize ─┐
//!              │                  initialize answered -32022 ─► probe again (once)
//!              └ stdio: silence, or the server died ─► restart the process, then initialize
//! ```
//!
//! A stdio server of the handshake era may end its process on any request
//! before `initialize` (the official Rust SDK before 3.x does) or ignore it
//! and be left in a state nobody knows: the connection starts it again
//! (once) and speaks `initialize` to the new process. The probe waits
//! [`STDIO_PROBE_TIMEOUT`] there: a server answers an unknown request in
//! milliseconds once it reads stdin, and the one that never answers
//! costs that much once, as the application remembers the era.
//!
//! The prober sends the probe through the engine; everything else its
//! verdict implies ([`ProbeStep`]) the connection does.

use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::types::CloseReason;
use super::wire::Wire;
use crate::mcp::handshake::SUPPORTED_PROTOCOL_VERSIONS;
use crate::mcp::types::{Implementation, InitializeResult, TASKS_EXTENSION};
use crate::mcp::ClientConfig;
use crate::modern::probe::{stdio_probe_verdict, Era, EraPolicy, ProbeVerdict, StdioProbeOutcome};
use crate::modern::{
    with_meta, RequestMeta, ToolHeaders, DISCOVER_METHOD, SUPPORTED_MODERN_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::rpc::{Engine, LocalError, RequestError, RequestOptions};

/// What a probe's answer means for the connection.
#[derive(Debug)]
pub(super) enum ProbeStep {
    /// The server speaks 2026-07-28 at `version`; `server` stands in for
    /// the `initialize` result the era has none of.
    Modern {
        /// The version chosen.
        version: String,
        /// What `server/discover` said.
        server: Box<InitializeResult>,
    },
    /// Probe again (once) with this version.
    Again(String),
    /// A server of the handshake era: leave the era, send `initialize`.
    /// `silent`: it did not answer at all (what it did with the probe is
    /// unknown).
    Handshake {
        /// Set when the probe timed out: after this many milliseconds.
        silent: Option<u64>,
    },
    /// No era both sides speak.
    Close(CloseReason),
}

/// How long the probe of a stdio server waits for an answer once the
/// server has read it, before the server is taken for one of the
/// handshake era and started again: a server that reads its stdin answers
/// an unknown method in milliseconds, and the wait is paid by every first
/// connection to a server that never answers. A server still starting
/// (an interpreter loading a large program, `npx` fetching a package) has
/// not read the probe yet: the driver tells ([`Output::CheckStdin`]), and
/// the wait starts over while the probe sits unread, up to the request
/// timeout. Where the driver cannot tell, the wait counts from the probe.
///
/// [`Output::CheckStdin`]: super::Output::CheckStdin
pub const STDIO_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the driver is asked whether the stdio probe was read.
const STDIN_CHECK_EVERY: Duration = Duration::from_millis(100);

/// How long the probe of an HTTP server waits (an HTTP server answers
/// every request with a status; this bounds a slow network or a cold start).
pub const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The probe in flight.
#[derive(Debug, Clone, Copy)]
struct Probe {
    id: u64,
    retried: bool,
}

/// The era decision of one connection (see the [module docs](self)).
#[derive(Debug)]
pub(super) struct Prober {
    policy: EraPolicy,
    hint: Option<Era>,
    timeout: Duration,
    probe: Option<Probe>,
    /// A probe given up on (its process is being replaced): its completion
    /// is nobody's.
    abandoned: Option<u64>,
    /// Probes sent (bounds re-probing).
    sent: u32,
    /// A stdio probe's silence deadline (moved on while the server has not
    /// read it), and when to ask the driver next.
    stdio: Option<StdioWait>,
}

/// The timers of a stdio probe.
#[derive(Debug, Clone, Copy)]
struct StdioWait {
    /// Silent past this: the server is restarted.
    until: Instant,
    /// When to emit the next `CheckStdin`.
    check: Instant,
    /// Whether the driver ever said the probe was still unread.
    waited: bool,
}

/// What a probe's timers ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProbeTimer {
    /// Nothing due.
    Nothing,
    /// Ask the driver how much of stdin is unread.
    CheckStdin,
    /// The server read the probe (or could not be asked) and stayed
    /// silent; `waited`: it was seen starting first.
    Silent {
        /// Whether it was seen not to have read the probe for a while.
        waited: bool,
    },
}

impl Prober {
    pub(super) fn new(policy: EraPolicy, hint: Option<Era>, timeout: Duration) -> Prober {
        Prober {
            policy,
            hint,
            timeout,
            probe: None,
            abandoned: None,
            sent: 0,
            stdio: None,
        }
    }

    /// The probe's own timers (stdio): the next one due.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        let w = self.stdio.filter(|_| self.probe.is_some())?;
        Some(w.until.min(w.check))
    }

    /// Fires the probe's timers.
    pub(super) fn handle_timeout(&mut self, now: Instant) -> ProbeTimer {
        let Some(w) = self.stdio.as_mut().filter(|_| self.probe.is_some()) else {
            return ProbeTimer::Nothing;
        };
        if now >= w.until {
            let waited = w.waited;
            self.stdio = None;
            return ProbeTimer::Silent { waited };
        }
        if now >= w.check {
            w.check = now + STDIN_CHECK_EVERY;
            return ProbeTimer::CheckStdin;
        }
        ProbeTimer::Nothing
    }

    /// The driver's answer to `CheckStdin`: while the probe is unread,
    /// the server is still starting, and its silence has not begun.
    pub(super) fn stdin_unread(&mut self, now: Instant, unread: Option<usize>) {
        let timeout = self.timeout;
        if let (Some(w), Some(n)) = (self.stdio.as_mut(), unread) {
            if n > 0 {
                w.until = w.until.max(now + timeout);
                w.waited = true;
            }
        }
    }

    /// The silence allowed once the probe is read.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The policy.
    pub(super) fn policy(&self) -> EraPolicy {
        self.policy
    }

    /// Whether a probe was sent to the server (to this process of it).
    pub(super) fn probed(&self) -> bool {
        self.sent > 0
    }

    /// Gives up on the probe in flight (the server is being started
    /// again): its completion will be swallowed. Its id, if one was out.
    pub(super) fn abandon(&mut self) -> Option<u64> {
        self.stdio = None;
        let probe = self.probe.take()?;
        self.abandoned = Some(probe.id);
        Some(probe.id)
    }

    /// Whether `id` is an abandoned probe (true once).
    pub(super) fn take_abandoned(&mut self, id: u64) -> bool {
        if self.abandoned == Some(id) {
            self.abandoned = None;
            return true;
        }
        false
    }

    /// Whether the connection starts with the handshake rather than the
    /// probe.
    pub(super) fn handshake_first(&self, wire: &Wire) -> bool {
        wire.is_legacy_sse()
            || self.policy == EraPolicy::Legacy
            || (self.policy == EraPolicy::Auto && self.hint == Some(Era::Legacy))
    }

    /// Sends `server/discover` at `version` (the wire enters the era
    /// first); its id.
    pub(super) fn send(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        wire: &mut Wire,
        client: &ClientConfig,
        version: &str,
        retried: bool,
    ) -> Result<u64, LocalError> {
        self.sent += 1;
        let params = with_meta(None, &envelope(client, version)).unwrap_or_default();
        let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
        wire.begin_era(version);
        let default = engine.config().default_timeout;
        // Over stdio the probe's own timers decide silence (a server still
        // starting gets the time it needs, up to the request timeout); a
        // silent probe's process is replaced: no cancellation is owed to
        // it.
        let stdio = wire.is_stdio() && self.policy != EraPolicy::Modern;
        let timeout = match self.policy {
            EraPolicy::Modern => default,
            _ if stdio => default.max(self.timeout),
            _ => self.timeout.min(default),
        };
        let mut options = RequestOptions::default().timeout(timeout);
        options.quiet = wire.is_stdio();
        self.stdio = stdio.then(|| StdioWait {
            until: now + self.timeout,
            check: now + STDIN_CHECK_EVERY,
            waited: false,
        });
        let id = engine.request(now, DISCOVER_METHOD, Some(&raw), options)?;
        wire.note_request(id, DISCOVER_METHOD, Some(&params), &ToolHeaders::default());
        self.probe = Some(Probe { id, retried });
        Ok(id)
    }

    /// Whether request `id` is the probe in flight.
    pub(super) fn is_probe(&self, id: u64) -> bool {
        self.probe.is_some_and(|p| p.id == id)
    }

    /// The probe's answer decides the era (`None`: no probe is out).
    pub(super) fn verdict(
        &mut self,
        outcome: Result<Box<RawValue>, RequestError>,
    ) -> Option<ProbeStep> {
        let probe = self.probe.take()?;
        self.stdio = None;
        let legacy_versions = SUPPORTED_PROTOCOL_VERSIONS;
        let silent = match &outcome {
            Err(RequestError::Timeout { ms }) => Some(*ms),
            _ => None,
        };
        let verdict = match &outcome {
            Ok(raw) => stdio_probe_verdict(
                StdioProbeOutcome::Result(raw.get()),
                SUPPORTED_MODERN_VERSIONS,
                legacy_versions,
                !probe.retried,
            ),
            Err(RequestError::Remote(e)) => stdio_probe_verdict(
                StdioProbeOutcome::Error {
                    code: e.code,
                    message: &e.message,
                    data: e.data.as_deref().map(RawValue::get),
                },
                SUPPORTED_MODERN_VERSIONS,
                legacy_versions,
                !probe.retried,
            ),
            Err(RequestError::Timeout { .. }) => ProbeVerdict::Legacy,
            // An HTTP error status whose body is not a modern JSON-RPC
            // error (those arrive as `Remote`): a legacy server.
            Err(RequestError::Http { .. }) => ProbeVerdict::Legacy,
            Err(e) => return Some(ProbeStep::Close(CloseReason::Transport(e.to_string()))),
        };
        Some(match verdict {
            ProbeVerdict::Modern {
                version,
                discovered,
            } => {
                let d = discovered.map(|d| *d);
                let server_info = d
                    .as_ref()
                    .and_then(|d| d.server_info())
                    .unwrap_or_else(|| Implementation::new("unknown", ""));
                let server = InitializeResult {
                    protocol_version: version.clone(),
                    capabilities: d
                        .as_ref()
                        .map(|d| d.capabilities.clone())
                        .unwrap_or_default(),
                    server_info,
                    instructions: d.and_then(|d| d.instructions),
                    extra: Default::default(),
                };
                ProbeStep::Modern {
                    version,
                    server: Box::new(server),
                }
            }
            ProbeVerdict::RetryModern { version } => ProbeStep::Again(version),
            ProbeVerdict::Legacy if self.policy == EraPolicy::Modern => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    Ok(_) => "no 2026-07-28 in its supported versions".into(),
                };
                ProbeStep::Close(CloseReason::Handshake(format!(
                    "the server does not speak the 2026-07-28 protocol (server/discover: {why})"
                )))
            }
            ProbeVerdict::Legacy => ProbeStep::Handshake { silent },
            ProbeVerdict::Incompatible(m) => ProbeStep::Close(CloseReason::Handshake(m)),
        })
    }

    /// `initialize` failed with `error`: whether to probe (once) after
    /// all — a server that locked itself to 2026-07-28 (its -32022), or
    /// one remembered as legacy that no longer is.
    pub(super) fn probe_after(&self, error: &RequestError, wire: &Wire) -> bool {
        if self.policy != EraPolicy::Auto || self.sent >= 2 {
            return false;
        }
        let modern_evidence = matches!(error, RequestError::Remote(e)
            if e.code == UNSUPPORTED_PROTOCOL_VERSION);
        let hinted = self.hint == Some(Era::Legacy)
            && matches!(error, RequestError::Remote(_) | RequestError::Http { .. });
        (modern_evidence || hinted) && !wire.is_legacy_sse()
    }
}

/// The `_meta` envelope of the era at `version` for this client.
pub(super) fn envelope(client: &ClientConfig, version: &str) -> RequestMeta {
    let mut capabilities = client.capabilities.clone();
    if client.tasks {
        let extensions = capabilities
            .extra
            .entry("extensions")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(map) = extensions.as_object_mut() {
            map.entry(TASKS_EXTENSION)
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
        }
    }
    RequestMeta::new(version, capabilities, Some(client.client_info.clone()))
}
