//! Session and failure bookkeeping of the Streamable HTTP transport: the
//! listener stopped, streams and requests failed, aborts, the fatal end
//! and the finish.

use std::time::Instant;

use super::{
    decoder, Body, HttpEvent, ListenState, Owner, Phase, StreamableHttp, MAX_CONSECUTIVE_EXPIRIES,
};
use crate::transport::{ExchangeId, RequestFailure};

impl StreamableHttp {
    /// Closes the listener (for a new session: its event ids are forgotten).
    pub(super) fn stop_listener(&mut self) {
        if let ListenState::Open(ex) = self.listener.state {
            self.abort_exchange(Some(ex));
        }
        if self.listener.state != ListenState::Disabled {
            self.listener.state = ListenState::Off;
        }
        self.listener.sse = decoder(&self.config);
        self.listener.failures = 0;
        self.listener.saw_event = false;
    }

    /// Fails, with `SessionExpired`, every request whose answer can no
    /// longer come: awaiting resumption, or expected on another stream of
    /// the session being given up. Requests whose own exchange is still
    /// open stay: an unanswered POST's own answer decides (a 404 makes it
    /// be sent again), and a stream the server opened before it dropped
    /// the session may still carry the answer (a server that ends the
    /// session, then answers the request that ended it); if it ends
    /// without, the request fails then (it cannot be resumed in another
    /// session).
    pub(super) fn fail_session_streams(&mut self) {
        let doomed: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                !p.exchange
                    .and_then(|ex| self.exchanges.get(&ex))
                    .is_some_and(|x| {
                        matches!(x.owner, Owner::Request(_))
                            && matches!(x.body, Body::Head | Body::Json(_) | Body::Sse)
                    })
            })
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            self.fail_pending(id, RequestFailure::SessionExpired);
        }
    }

    /// A 404 answered an exchange that carried the session of `generation`.
    pub(super) fn session_gone(&mut self, generation: u64) {
        if generation != self.generation || self.phase != Phase::Ready {
            return;
        }
        self.consecutive_expiries += 1;
        if self.consecutive_expiries > MAX_CONSECUTIVE_EXPIRIES {
            self.fatal(format!(
                "the server ended {} sessions in a row (HTTP 404) before anything succeeded in them",
                self.consecutive_expiries
            ));
            return;
        }
        self.phase = Phase::Expired;
        self.confirming = None;
        self.fail_session_streams();
        self.stop_listener();
        self.events.push_back(HttpEvent::SessionExpired);
    }

    /// Forgets request `id` and fails it, unless its response was delivered.
    pub(super) fn fail_pending(&mut self, id: u64, failure: RequestFailure) {
        if let Some(p) = self.pending.remove(&id) {
            self.abort_exchange(p.exchange);
            if !p.answered {
                self.fail(id, failure);
            }
        }
    }

    pub(super) fn fail(&mut self, id: u64, failure: RequestFailure) {
        if matches!(self.phase, Phase::Initializing { id: init, .. } if init == id) {
            self.initialize_failed();
        }
        self.events.push_back(HttpEvent::Fail { id, failure });
    }

    /// The `initialize` failed: the next request is a new one, without the
    /// session id its answer may have carried.
    pub(super) fn initialize_failed(&mut self) {
        self.phase = Phase::AwaitInit;
        self.session_id = None;
    }

    pub(super) fn note(&mut self, message: impl Into<String>) {
        self.events.push_back(HttpEvent::Note(message.into()));
    }

    pub(super) fn diag(&mut self, message: impl Into<String>) {
        self.events.push_back(HttpEvent::Diagnostic(message.into()));
    }

    /// Aborts the exchange if it is still open.
    pub(super) fn abort_exchange(&mut self, ex: Option<ExchangeId>) {
        if let Some(ex) = ex {
            if self.exchanges.remove(&ex).is_some() {
                self.events.push_back(HttpEvent::Abort(ex));
            }
        }
    }

    /// Aborts every exchange and forgets every request and held message.
    pub(super) fn abort_all(&mut self) {
        let open = std::mem::take(&mut self.exchanges);
        self.events.extend(open.into_keys().map(HttpEvent::Abort));
        self.pending.clear();
        self.held.clear();
        self.parked.clear();
        self.resend.clear();
        self.confirming = None;
        if self.listener.state != ListenState::Disabled {
            self.listener.state = ListenState::Off;
        }
    }

    pub(super) fn fatal(&mut self, message: String) {
        self.abort_all();
        self.phase = Phase::Dead;
        self.events.push_back(HttpEvent::Fatal(message));
    }

    /// While draining: once no notification is left in flight, the
    /// close goes on.
    pub(super) fn drained(&mut self, now: Instant) {
        if let Phase::Draining { delete, .. } = self.phase {
            if !self
                .exchanges
                .values()
                .any(|x| matches!(x.owner, Owner::Notify(_)) && matches!(x.body, Body::Head))
            {
                self.end_session(now, delete);
            }
        }
    }

    pub(super) fn finish(&mut self) {
        self.phase = Phase::Closed;
        self.events.push_back(HttpEvent::Finished);
    }
}
