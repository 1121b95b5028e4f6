//! Sending in the legacy HTTP+SSE transport: messages held until the
//! endpoint is known (or `notifications/initialized` accepted), the POSTs
//! and their failures.

use std::time::Instant;

use super::{
    Answer, Confirming, Held, LegacyEvent, LegacySse, Phase, Post, MAX_HELD_BYTES,
    MAX_HELD_MESSAGES,
};
use crate::exchange::redirect::{is_credential, Redirects};
use crate::rpc::SendKind;
use crate::transport::http::is_initialized_notification;
use crate::transport::{
    ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl, RequestFailure,
};

impl LegacySse {
    /// One outbound JSON-RPC message; held (in order, bounded) until the
    /// `endpoint` event arrived, then POSTed to the endpoint. Once
    /// `notifications/initialized` is POSTed, later messages are held
    /// until the server has accepted it (its 2xx head). Beyond the bound a
    /// request fails and anything else is dropped with a diagnostic.
    /// Ignored once the transport failed or closed.
    pub fn send(&mut self, _now: Instant, message: Vec<u8>, kind: SendKind) {
        if self.phase != Phase::Running {
            return;
        }
        if self.endpoint.is_some() && self.confirming.is_none() {
            self.dispatch(message, kind);
            return;
        }
        if self.held.len() >= MAX_HELD_MESSAGES
            || self.held_bytes.saturating_add(message.len()) > MAX_HELD_BYTES
        {
            let waiting = if self.endpoint.is_none() {
                "the server has not sent its `endpoint` event yet"
            } else {
                "the server has not accepted notifications/initialized yet"
            };
            let why = format!(
                "{waiting} and {} messages ({} bytes) already wait for it \
                 (limits: {MAX_HELD_MESSAGES} messages, {MAX_HELD_BYTES} bytes)",
                self.held.len(),
                self.held_bytes
            );
            self.refuse(&kind, why);
            return;
        }
        self.held_bytes += message.len();
        self.held.push_back(Held { message, kind });
    }

    /// Our headers, then the configured ones (except those we set, and
    /// credentials when `to` is not on the configured URL's origin).
    pub(super) fn headers(&self, to: &HttpUrl, ours: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = ours
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let home = to.same_origin(&self.origin);
        headers.extend(
            self.config
                .headers
                .iter()
                .filter(|(n, _)| !ours.iter().any(|(o, _)| o.eq_ignore_ascii_case(n)))
                .filter(|(n, _)| home || !is_credential(n))
                .cloned(),
        );
        headers
    }

    /// POSTs one message to the endpoint; `notifications/initialized`
    /// becomes what later messages wait for.
    fn dispatch(&mut self, message: Vec<u8>, kind: SendKind) {
        if !is_initialized_notification(&message, &kind) {
            self.post(message, kind);
            return;
        }
        if let Some(exchange) = self.post(message.clone(), kind) {
            self.confirming = Some(Confirming {
                exchange,
                message,
                retried: false,
            });
        }
    }

    /// Sends the held messages, in order, as long as nothing is being
    /// confirmed.
    pub(super) fn flush(&mut self) {
        while self.confirming.is_none() && self.phase == Phase::Running {
            let Some(held) = self.held.pop_front() else {
                break;
            };
            self.held_bytes -= held.message.len();
            self.dispatch(held.message, held.kind);
        }
    }

    pub(super) fn is_confirming(&self, ex: ExchangeId) -> bool {
        self.confirming.as_ref().is_some_and(|c| c.exchange == ex)
    }

    /// The POST of `notifications/initialized` ended without a 2xx head:
    /// refused — the session cannot start — or failed before its head:
    /// sent again once, then given up.
    fn confirming_failed(&mut self, refused: bool, failure: RequestFailure) {
        let retried = self.confirming.as_mut().map(|c| &mut c.retried);
        let note = match crate::transport::initialized_failed(refused, retried, &failure) {
            None => return,
            Some(Err(fatal)) => return self.fatal(fatal),
            Some(Ok(note)) => note,
        };
        let Some(message) = self.confirming.as_ref().map(|c| c.message.clone()) else {
            return;
        };
        self.events.push_back(LegacyEvent::Diagnostic(note));
        match self.post(message, SendKind::Notification) {
            Some(ex) => {
                if let Some(c) = self.confirming.as_mut() {
                    c.exchange = ex;
                }
            }
            None => self.confirming = None,
        }
    }

    /// POSTs one message to the endpoint (if known): its exchange.
    fn post(&mut self, message: Vec<u8>, kind: SendKind) -> Option<ExchangeId> {
        let url = self.endpoint.clone()?;
        let exchange = self.next_exchange();
        let purpose = match kind {
            SendKind::Request { .. } => ExchangePurpose::Request,
            SendKind::Notification | SendKind::Response { .. } => ExchangePurpose::Notify,
        };
        let headers = self.headers(
            &url,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
        );
        let request = HttpRequest {
            exchange,
            method: HttpMethod::Post,
            url,
            headers,
            body: message,
            purpose,
            // The answer comes on the event stream, not on this POST.
            carries: None,
        };
        self.posts.insert(
            exchange,
            Post {
                kind,
                done: false,
                answer: Answer::Waiting,
                follow: Some(Redirects::new(request.clone())),
            },
        );
        self.events.push_back(LegacyEvent::Request(request));
        Some(exchange)
    }

    /// A message that cannot be sent: fails a request, reports the rest.
    fn refuse(&mut self, kind: &SendKind, why: String) {
        let event = match kind {
            SendKind::Request { id } => LegacyEvent::Fail {
                id: *id,
                failure: RequestFailure::Other(format!("request not sent: {why}")),
            },
            SendKind::Notification => {
                LegacyEvent::Diagnostic(format!("notification not sent: {why}"))
            }
            SendKind::Response { id } => LegacyEvent::Diagnostic(format!(
                "answer to the server's request {id} not sent: {why}"
            )),
        };
        self.events.push_back(event);
    }

    /// The POST of `post` (exchange `ex`) failed with `failure`.
    pub(super) fn post_failed(&mut self, ex: ExchangeId, post: Post, failure: RequestFailure) {
        if self.is_confirming(ex) {
            let refused = matches!(post.answer, Answer::Refused(_));
            return self.confirming_failed(refused, failure);
        }
        let event = match post.kind {
            SendKind::Request { id } if !post.done => LegacyEvent::Fail { id, failure },
            SendKind::Request { .. } => return,
            SendKind::Notification => {
                LegacyEvent::Diagnostic(format!("a notification POST failed: {failure}"))
            }
            SendKind::Response { id } => LegacyEvent::Diagnostic(format!(
                "the POST answering the server's request {id} failed: {failure}"
            )),
        };
        self.events.push_back(event);
    }
}
