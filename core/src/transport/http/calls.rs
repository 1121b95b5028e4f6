//! The calls of the Streamable HTTP transport's user: sending, the end of
//! the handshake, a new session, a completed request and the close.

use std::time::Instant;

use super::{
    after, is_initialized_notification, Body, Confirming, Exchange, ListenState, Outgoing, Owner,
    Phase, StreamableHttp,
};
use crate::rpc::SendKind;
use crate::transport::{ExchangeId, ExchangePurpose, HttpMethod, RequestFailure};

impl StreamableHttp {
    /// Sends one outbound JSON-RPC message (compact JSON from the engine)
    /// in its own POST. The first request after [`new`](Self::new) or
    /// [`reset_session`](Self::reset_session) is the `initialize`: it goes
    /// out alone; every other message is held until
    /// [`initialized`](Self::initialized). After close, a request fails at
    /// once. Without era headers: see [`send_with`](Self::send_with).
    pub fn send(&mut self, now: Instant, message: Vec<u8>, kind: SendKind) {
        self.send_with(now, message, kind, Vec::new());
    }

    /// [`send`](Self::send) with the 2026-07-28 era headers of the message
    /// (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), computed by whoever built
    /// it ([`crate::modern::message_headers`]). They go out with its POST
    /// only while that era is spoken ([`begin_modern`](Self::begin_modern)).
    pub fn send_with(
        &mut self,
        now: Instant,
        message: Vec<u8>,
        kind: SendKind,
        era_headers: Vec<(String, String)>,
    ) {
        let out = Outgoing {
            bytes: message,
            kind,
            era_headers,
        };
        self.submit(now, out);
    }

    pub(super) fn submit(&mut self, now: Instant, out: Outgoing) {
        self.touch(now);
        match self.phase {
            Phase::AwaitInit => match out.kind {
                SendKind::Request { id } => {
                    self.phase = Phase::Initializing {
                        id,
                        answered: false,
                    };
                    self.post(out, false);
                }
                _ => self.hold(out),
            },
            Phase::Initializing { .. } | Phase::Expired => self.hold(out),
            Phase::Ready if self.auth_hold => self.park(out),
            Phase::Ready if self.confirming.is_some() => self.hold(out),
            Phase::Ready => {
                self.post(out, false);
            }
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Dead | Phase::Closed => {
                if let SendKind::Request { id } = out.kind {
                    self.fail(id, RequestFailure::Other("the connection is closed".into()));
                }
            }
        }
    }

    /// The `initialize` result arrived and `notifications/initialized` has
    /// been given to [`send`](Self::send): records the negotiated version
    /// (sent as `MCP-Protocol-Version` from now on) and POSTs
    /// `notifications/initialized` alone. Only once the server has accepted
    /// it (the 2xx head of that POST) are the held messages released —
    /// requests that met a 404 of the previous session first, then the rest
    /// in send order — and the GET listener opened if configured, so that
    /// no request of the session can reach the server before it (the POSTs
    /// travel on separate connections). Messages sent meanwhile are held.
    ///
    /// If the server refuses that POST (any other status than 2xx, 404 —
    /// the session is gone: [`HttpEvent::SessionExpired`] — or an
    /// authorization to obtain), the session cannot start:
    /// [`HttpEvent::Fatal`] quoting the answer. If the POST fails before
    /// its head (connection reset…), it is sent again once; a second
    /// failure is fatal too. Without a `notifications/initialized` among
    /// the held messages, everything is released at once.
    ///
    /// [`HttpEvent::SessionExpired`]: super::HttpEvent::SessionExpired
    /// [`HttpEvent::Fatal`]: super::HttpEvent::Fatal
    pub fn initialized(&mut self, now: Instant, protocol_version: &str) {
        self.touch(now);
        if !matches!(self.phase, Phase::AwaitInit | Phase::Initializing { .. }) {
            return;
        }
        self.protocol_version = Some(protocol_version.to_owned());
        self.phase = Phase::Ready;
        let first = self
            .held
            .iter()
            .position(|out| is_initialized_notification(&out.bytes, &out.kind));
        match first.and_then(|at| self.held.remove(at)) {
            Some(message) => {
                self.confirming = Some(Confirming {
                    exchange: None,
                    message,
                    retried: false,
                });
                self.post_confirming();
            }
            None => self.release(now),
        }
    }

    /// POSTs the `notifications/initialized` being confirmed.
    pub(super) fn post_confirming(&mut self) {
        let Some(message) = self.confirming.as_ref().map(|c| c.message.clone()) else {
            return;
        };
        let ex = self.post(message, false);
        if let Some(c) = self.confirming.as_mut() {
            c.exchange = Some(ex);
        }
    }

    /// Whether `ex` is the POST of the `notifications/initialized` being
    /// confirmed.
    pub(super) fn is_confirming(&self, ex: ExchangeId) -> bool {
        self.confirming
            .as_ref()
            .is_some_and(|c| c.exchange == Some(ex))
    }

    /// The server accepted `notifications/initialized` (or there is none to
    /// wait for): sends again the requests that met a 404 of the previous
    /// session, then the held messages in send order, and opens the GET
    /// listener if configured.
    pub(super) fn release(&mut self, now: Instant) {
        self.confirming = None;
        self.flush_resends();
        for out in std::mem::take(&mut self.held) {
            self.post(out, false);
        }
        if self.config.listen
            && matches!(
                self.listener.state,
                ListenState::Off | ListenState::Waiting(_) | ListenState::GaveUp
            )
        {
            self.listener.failures = 0;
            self.open_listener();
            if !self.config.listen_settle.is_zero() {
                self.settle_until = now.checked_add(self.config.listen_settle);
            }
        }
    }

    /// Whether `notifications/initialized` has been accepted and the GET
    /// listener opened then has answered (or failed, or `listen_settle`
    /// passed, or there is none): the Connection reports itself ready only
    /// then.
    pub fn settled(&self) -> bool {
        self.settle_until.is_none() && self.confirming.is_none()
    }

    /// Before sending `initialize` again after [`HttpEvent::SessionExpired`]:
    /// forgets the session id and the version, fails the requests whose
    /// streams belonged to the old session, closes the listener. The next
    /// request sent goes out alone (without `Mcp-Session-Id`); every other
    /// send is held until [`initialized`](Self::initialized).
    ///
    /// [`HttpEvent::SessionExpired`]: super::HttpEvent::SessionExpired
    pub fn reset_session(&mut self) {
        if matches!(
            self.phase,
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Dead | Phase::Closed
        ) {
            return;
        }
        self.fail_session_streams();
        self.stop_listener();
        self.confirming = None;
        self.session_id = None;
        self.session_origin = None;
        self.protocol_version = None;
        self.generation += 1;
        self.phase = Phase::AwaitInit;
    }

    /// The engine completed our request `id` (response, timeout, cancel):
    /// stops resuming its stream, forgets it if it was still held, and
    /// aborts its exchange if one is open.
    pub fn request_done(&mut self, id: u64) {
        if self.phase
            == (Phase::Initializing {
                id,
                answered: false,
            })
        {
            // Timed out or cancelled: the next request is a new initialize.
            self.initialize_failed();
        }
        self.held.retain(|out| out.kind != SendKind::Request { id });
        self.parked
            .retain(|out| out.kind != SendKind::Request { id });
        self.resend.retain(|(r, _)| *r != id);
        if let Some(p) = self.pending.remove(&id) {
            self.abort_exchange(p.exchange);
        }
    }

    /// Graceful close: aborts every open exchange, sends DELETE with the
    /// session id if there is one (any answer or failure will do), then
    /// reports [`HttpEvent::Finished`], also after `close_timeout` without
    /// an answer. Pending requests are not failed: the Connection closes
    /// them. Idempotent.
    ///
    /// [`HttpEvent::Finished`]: super::HttpEvent::Finished
    pub fn begin_close(&mut self, now: Instant) {
        self.touch(now);
        match self.phase {
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Closed => return,
            Phase::Dead => return self.finish(),
            _ => {}
        }
        self.settle_until = None;
        // After a 404 the server has already ended the session.
        let delete = self.sendable_session().is_some() && self.phase != Phase::Expired;
        // What was already sent of notifications and responses goes on:
        // a cancellation must reach the server before the session ends.
        // Those the server has not answered yet (a 202 is enough), but the
        // `notifications/initialized` of a session about to end.
        let notifying: Vec<ExchangeId> = self
            .exchanges
            .iter()
            .filter(|(ex, x)| {
                matches!(x.owner, Owner::Notify(_))
                    && matches!(x.body, Body::Head)
                    && self
                        .confirming
                        .as_ref()
                        .is_none_or(|c| c.exchange != Some(**ex))
            })
            .map(|(ex, _)| *ex)
            .collect();
        let kept: Vec<(ExchangeId, Exchange)> = notifying
            .iter()
            .filter_map(|ex| self.exchanges.remove(ex).map(|x| (*ex, x)))
            .collect();
        self.abort_all();
        if !kept.is_empty() {
            self.exchanges.extend(kept);
            self.phase = Phase::Draining {
                delete,
                until: after(now, self.config.close_timeout),
            };
            return;
        }
        self.end_session(now, delete);
    }

    /// After the drain: the DELETE of the session (`delete`), else done.
    pub(super) fn end_session(&mut self, now: Instant, delete: bool) {
        if delete {
            let ex = self.next_id();
            let headers = self.headers(HttpMethod::Delete, None, false);
            self.open(
                ex,
                HttpMethod::Delete,
                headers,
                Vec::new(),
                ExchangePurpose::Close,
                Owner::Close,
            );
            self.phase = Phase::Closing {
                delete: Some(ex),
                until: after(now, self.config.close_timeout),
            };
        } else {
            self.finish();
        }
    }
}
