//! Ends and failures of exchanges: streams resumed or failed, the
//! listener's reconnection and backoff.

use crate::codec::jsonl::Line;
use std::time::Instant;

use crate::codec::sse::SseEnd;
use crate::transport::http::{
    after, decoder, is_header_value, retry_delay, Body, ListenState, Owner, Phase, StreamableHttp,
};
use crate::transport::RequestFailure;

impl StreamableHttp {
    pub(super) fn exchange_failed(
        &mut self,
        now: Instant,
        owner: Owner,
        body: Body,
        error: &str,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) {
        match (owner, body) {
            (owner, Body::Error(e)) => self.finish_error(owner, e, deliver),
            (Owner::Close, _) => {
                if matches!(self.phase, Phase::Closing { .. }) {
                    self.finish();
                }
            }
            (Owner::Listen, Body::Sse) => self.stream_ended(now, Owner::Listen, Some(error)),
            (Owner::Listen, _) => {
                self.listener.state = ListenState::Off;
                self.listen_failed(now, error);
            }
            (Owner::Notify(what), _) => self.diag(format!("POST of a {what} failed: {error}")),
            (owner @ Owner::Request(_), Body::Sse) | (owner @ Owner::Resume(_), _) => {
                self.stream_ended(now, owner, Some(error));
            }
            (Owner::Request(id), _) => {
                self.fail_pending(id, RequestFailure::Other(error.to_owned()));
            }
        }
    }

    /// An SSE stream (or a resuming GET) ended; `error` if it broke.
    pub(super) fn stream_ended(&mut self, now: Instant, owner: Owner, error: Option<&str>) {
        match owner {
            Owner::Request(id) | Owner::Resume(id) => self.request_stream_ended(now, id, error),
            Owner::Listen => {
                let end = self.listener.sse.finish();
                self.listener.state = ListenState::Off;
                if self.phase != Phase::Ready {
                    return;
                }
                if self.listener.saw_event {
                    if let Some(error) = error {
                        self.diag(format!("GET stream broke ({error}); reconnecting"));
                    } else if end == SseEnd::IncompleteEvent {
                        self.diag("GET stream ended inside an event; reconnecting");
                    }
                    let delay = retry_delay(&self.config, &self.listener.sse);
                    self.listener.state = ListenState::Waiting(after(now, delay));
                } else {
                    self.listen_failed(now, error.unwrap_or("the stream ended without any event"));
                }
            }
            Owner::Notify(_) | Owner::Close => {}
        }
    }

    /// A request's stream ended: done, resumed after `retry`, or failed.
    fn request_stream_ended(&mut self, now: Instant, id: u64, error: Option<&str>) {
        let resumable = matches!(self.phase, Phase::Ready | Phase::Initializing { .. });
        let generation = self.generation;
        let max_attempts = self.config.max_resume_attempts;
        let config = &self.config;
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        p.exchange = None;
        let sse = p.sse.get_or_insert_with(|| decoder(config));
        let end = sse.finish();
        if p.answered {
            self.pending.remove(&id);
            return;
        }
        if !resumable || p.generation != generation {
            return self.fail_pending(id, RequestFailure::SessionExpired);
        }
        if self.modern.is_some() {
            // 2026-07-28 has no resumption: the request is lost (the
            // connection issues it again with a new id).
            return self.fail_pending(id, RequestFailure::StreamLost { id });
        }
        let last = sse.last_event_id();
        let why = if last.is_empty() {
            Some("it carried no event id")
        } else if !is_header_value(last) {
            Some("its event id cannot be sent in a header")
        } else if p.attempts >= max_attempts {
            Some("the resumption attempts are exhausted")
        } else {
            None
        };
        if let Some(why) = why {
            self.diag(format!(
                "the stream of request {id} ended before its response and cannot be resumed: {why}"
            ));
            return self.fail_pending(id, RequestFailure::NoResponse { id });
        }
        p.resume_at = Some(after(now, retry_delay(config, sse)));
        let how = match (error, end) {
            (Some(error), _) => format!("broke ({error})"),
            (None, SseEnd::IncompleteEvent) => "ended inside an event".to_owned(),
            (None, SseEnd::Clean) => "ended".to_owned(),
        };
        self.diag(format!(
            "the stream of request {id} {how} before its response; resuming"
        ));
    }

    /// The listener failed: retry with exponential backoff, or give up.
    pub(super) fn listen_failed(&mut self, now: Instant, why: &str) {
        self.settle_until = None;
        self.listener.failures = self.listener.failures.saturating_add(1);
        if self.phase != Phase::Ready {
            self.listener.state = ListenState::Off;
            return;
        }
        let failures = self.listener.failures;
        if failures > self.config.max_listen_attempts {
            self.listener.state = ListenState::GaveUp;
            return self.diag(format!(
                "GET stream for server messages failed {failures} times; giving up: {why}"
            ));
        }
        let base = retry_delay(&self.config, &self.listener.sse);
        let factor = 1u32 << (failures - 1).min(20);
        let delay = base.saturating_mul(factor).min(self.config.max_retry);
        self.listener.state = ListenState::Waiting(after(now, delay));
        self.diag(format!(
            "GET stream for server messages failed ({why}); retrying in {} ms",
            delay.as_millis()
        ));
    }
}
