//! What the Streamable HTTP transport sends: the headers of a request,
//! its exchange, POSTs, held messages, resumptions and the listener's GET.

use super::{
    carries_session, is_header_value, Body, Exchange, HttpEvent, ListenState, Outgoing, Owner,
    Pending, Phase, StreamableHttp, Waiting, MAX_HELD,
};
use crate::exchange::redirect::{is_credential, Redirects};
use crate::rpc::SendKind;
use crate::transport::{ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, RequestFailure};

/// `Accept` of every POST.
const ACCEPT_POST: &str = "application/json, text/event-stream";
/// `Accept` of every GET.
const ACCEPT_SSE: &str = "text/event-stream";
/// Headers the transport sets itself: same-named configured headers are
/// skipped (lower case).
const OWN_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

impl StreamableHttp {
    pub(super) fn next_id(&mut self) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        id
    }

    /// The headers of a request: `Accept`, `Content-Type`, the configured
    /// ones (except those the transport sets), the session id and the
    /// negotiated version when known.
    pub(super) fn headers(
        &self,
        method: HttpMethod,
        accept: Option<&str>,
        json_body: bool,
    ) -> Vec<(String, String)> {
        let mut h = self.base_headers(method, accept, json_body);
        if let Some(version) = &self.modern {
            h.push(("MCP-Protocol-Version".to_owned(), version.clone()));
            return h;
        }
        if let Some(s) = self.sendable_session() {
            h.push(("Mcp-Session-Id".to_owned(), s.to_owned()));
        }
        if let Some(v) = &self.protocol_version {
            h.push(("MCP-Protocol-Version".to_owned(), v.clone()));
        }
        h
    }

    /// `Accept`, `Content-Type`, the configured headers and the
    /// authorization.
    fn base_headers(
        &self,
        method: HttpMethod,
        accept: Option<&str>,
        json_body: bool,
    ) -> Vec<(String, String)> {
        let mut h = Vec::with_capacity(self.config.headers.len() + 5);
        if let Some(accept) = accept {
            h.push(("Accept".to_owned(), accept.to_owned()));
        }
        if json_body {
            h.push(("Content-Type".to_owned(), "application/json".to_owned()));
        }
        let home = self.url.same_origin(&self.origin);
        for (name, value) in &self.config.headers {
            let replaced =
                self.authorization.is_some() && name.eq_ignore_ascii_case("authorization");
            let elsewhere = !home && is_credential(name);
            if !(replaced || elsewhere || OWN_HEADERS.iter().any(|o| name.eq_ignore_ascii_case(o)))
            {
                h.push((name.clone(), value.clone()));
            }
        }
        if let Some(a) = &self.authorization {
            if self.url.same_origin(&self.auth_origin) {
                h.push(("Authorization".to_owned(), a.clone()));
            }
        }
        h.extend(self.dpop_proof(method));
        h
    }

    /// Emits an exchange and records it.
    pub(super) fn open(
        &mut self,
        ex: ExchangeId,
        method: HttpMethod,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        purpose: ExchangePurpose,
        owner: Owner,
    ) {
        let session = carries_session(&headers).then_some(self.generation);
        let dpop_nonce = headers.iter().any(|(n, _)| n == "DPoP").then(|| {
            self.dpop
                .as_ref()
                .and_then(|d| d.key.nonce_for(&self.url))
                .unwrap_or_default()
        });
        let carries = match owner {
            Owner::Request(id) | Owner::Resume(id) => Some(id),
            _ => None,
        };
        let request = HttpRequest {
            exchange: ex,
            method,
            url: self.url.clone(),
            headers,
            body,
            purpose,
            carries,
        };
        self.exchanges.insert(
            ex,
            Exchange {
                owner,
                body: Body::Head,
                session,
                resend: None,
                follow: Some(Redirects::new(request.clone())),
                dpop_nonce,
            },
        );
        self.events.push_back(HttpEvent::Request(request));
    }

    /// POSTs one message now; returns its exchange.
    pub(super) fn post(&mut self, out: Outgoing, resent: bool) -> ExchangeId {
        let ex = self.next_id();
        let keep = (self.auth_enabled && !matches!(out.kind, SendKind::Request { .. }))
            .then(|| out.clone());
        let (owner, purpose) = match &out.kind {
            SendKind::Request { id } => {
                let id = *id;
                let p = Pending {
                    message: Some(out.clone()),
                    exchange: Some(ex),
                    sse: None,
                    resume_at: None,
                    attempts: 0,
                    resent,
                    generation: self.generation,
                    answered: false,
                };
                if let Some(old) = self.pending.insert(id, p) {
                    // An id is never reused; if it were, the old one's
                    // exchange must not outlive its record.
                    self.abort_exchange(old.exchange);
                }
                (Owner::Request(id), ExchangePurpose::Request)
            }
            SendKind::Notification => (
                Owner::Notify("notification".into()),
                ExchangePurpose::Notify,
            ),
            SendKind::Response { id } => (
                Owner::Notify(format!("response to server request {id}")),
                ExchangePurpose::Notify,
            ),
        };
        let mut headers = self.headers(HttpMethod::Post, Some(ACCEPT_POST), true);
        if self.modern.is_some() {
            headers.extend(out.era_headers);
        }
        self.open(ex, HttpMethod::Post, headers, out.bytes, purpose, owner);
        if let (Some(keep), Some(x)) = (keep, self.exchanges.get_mut(&ex)) {
            x.resend = Some(keep);
        }
        ex
    }

    pub(super) fn hold(&mut self, out: Outgoing) {
        self.enqueue(Waiting::Session, out);
    }

    /// Queues a message that must wait (at most [`MAX_HELD`] per queue;
    /// beyond, a request fails and anything else is dropped).
    pub(super) fn enqueue(&mut self, until: Waiting, out: Outgoing) {
        let (queue, what) = match until {
            Waiting::Session => (&mut self.held, "the session to be initialized"),
            Waiting::Authorization => (&mut self.parked, "an authorization"),
        };
        if queue.len() < MAX_HELD {
            return queue.push_back(out);
        }
        let why = format!("more than {MAX_HELD} messages wait for {what}");
        match out.kind {
            SendKind::Request { id } => self.fail(id, RequestFailure::Other(why)),
            _ => self.diag(format!("message dropped: {why}")),
        }
    }

    /// Sends again (once) the requests that met a 404 of an old session.
    pub(super) fn flush_resends(&mut self) {
        let mut resend = std::mem::take(&mut self.resend);
        resend.sort_by_key(|(id, _)| *id);
        for (_, out) in resend {
            self.post(out, true);
        }
    }

    /// GETs a request's stream again with `Last-Event-ID`.
    pub(super) fn resume(&mut self, id: u64) {
        let resumable = matches!(self.phase, Phase::Ready | Phase::Initializing { .. });
        let generation = self.generation;
        let ex = ExchangeId(self.next_exchange);
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        p.resume_at = None;
        if !resumable || p.generation != generation {
            self.fail_pending(id, RequestFailure::SessionExpired);
            return;
        }
        p.attempts += 1;
        p.exchange = Some(ex);
        let last = p
            .sse
            .as_ref()
            .map(|d| d.last_event_id().to_owned())
            .unwrap_or_default();
        self.next_exchange += 1;
        let mut headers = self.headers(HttpMethod::Get, Some(ACCEPT_SSE), false);
        headers.push(("Last-Event-ID".to_owned(), last));
        self.open(
            ex,
            HttpMethod::Get,
            headers,
            Vec::new(),
            ExchangePurpose::Resume,
            Owner::Resume(id),
        );
    }

    pub(super) fn open_listener(&mut self) {
        let ex = self.next_id();
        let mut headers = self.headers(HttpMethod::Get, Some(ACCEPT_SSE), false);
        let last = self.listener.sse.last_event_id();
        if !last.is_empty() && is_header_value(last) {
            headers.push(("Last-Event-ID".to_owned(), last.to_owned()));
        }
        self.listener.state = ListenState::Open(ex);
        self.listener.saw_event = false;
        self.open(
            ex,
            HttpMethod::Get,
            headers,
            Vec::new(),
            ExchangePurpose::Listen,
            Owner::Listen,
        );
    }
}
