//! Inputs of the Streamable HTTP transport: response heads, body chunks,
//! ends and failures of its exchanges, and what they mean for requests,
//! the listener, the session and the close.

use std::time::Instant;

use serde_json::value::RawValue;

use super::{
    after, decoder, is_header_value, retry_delay, Body, ErrorBody, HttpEvent, ListenState, Owner,
    Phase, StreamableHttp, ERROR_BODY_LIMIT, ERROR_TEXT_MAX, HINT_MAX,
};
use crate::codec::preview;
use crate::codec::sse::{SseEnd, SseError, SseEvent, SseItem};
use crate::exchange::dpop::wants_nonce;
use crate::exchange::redirect::{Redirects, MAX_REDIRECTS};
use crate::rpc::{parse_message, ErrorObject, Message, RequestId};
use crate::transport::{ExchangeId, HttpRequest, RedirectError, RequestFailure, ResponseHead};

impl StreamableHttp {
    /// The head of exchange `ex`'s response arrived. Unknown or aborted
    /// exchanges are ignored. (`deliver` is part of the common input
    /// signature; a head alone never carries a message.)
    pub fn handle_head(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        head: &ResponseHead,
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        self.take_head(now, ex, head, deliver);
        self.drained(now);
    }

    /// [`handle_head`](Self::handle_head) but the drain of a close.
    fn take_head(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        head: &ResponseHead,
        _deliver: &mut dyn FnMut(&[u8]),
    ) {
        self.touch(now);
        let Some(x) = self.exchanges.get_mut(&ex) else {
            return;
        };
        if !matches!(x.body, Body::Head) {
            return;
        }
        if let Some(mut follow) = x.follow.take() {
            let next = ExchangeId(self.next_exchange);
            let allow = self.config.allow_cross_origin_redirects;
            match follow.follow(head, allow, next) {
                Some(Ok(request)) => return self.redirected(ex, follow, request, head.status),
                Some(Err(e)) => return self.redirect_refused(ex, e),
                None if follow.hops() > 0
                    && head.is_success()
                    && !matches!(self.phase, Phase::Closing { .. }) =>
                {
                    self.moved(&follow)
                }
                None => {}
            }
        }
        let Some(x) = self.exchanges.get(&ex) else {
            return;
        };
        let owner = x.owner.clone();
        let session = x.session;
        if head.is_success() && session == Some(self.generation) {
            self.consecutive_expiries = 0;
        }
        if owner == Owner::Close {
            self.abort_exchange(Some(ex));
            return self.finish();
        }
        if self.dpop_nonce_retry(now, ex, &owner, head) {
            return;
        }
        if self.auth_enabled
            && !matches!(owner, Owner::Resume(_))
            && self.phase != Phase::Expired
            && wants_authorization(head)
        {
            return self.auth_required(ex, owner, head);
        }
        if let (Owner::Request(id), Phase::Initializing { id: init, .. }) = (&owner, self.phase) {
            if *id == init && self.generation == 0 && head.status == 400 {
                // Read its body first: a 2026-07-28 server refuses the
                // handshake with 400 and -32022 (a remembered era gone
                // stale); anything else means the legacy transport.
                self.refused_init = Some(init);
                return self.set_body(ex, Body::Error(ErrorBody::new(head)));
            }
            if *id == init && self.generation == 0 && matches!(head.status, 404 | 405) {
                self.abort_exchange(Some(ex));
                return self.fall_back(init);
            }
        }
        if let (404, Some(generation)) = (head.status, session) {
            self.abort_exchange(Some(ex));
            return self.expired_exchange(owner, generation);
        }
        if head.is_success() && self.is_confirming(ex) {
            // notifications/initialized accepted: the session may carry
            // everything else now.
            self.release(now);
        }
        match owner {
            Owner::Request(id) => self.request_head(ex, id, head),
            Owner::Resume(id) => self.resume_head(now, ex, id, head),
            Owner::Notify(_) => {
                if !head.is_success() {
                    self.set_body(ex, Body::Error(ErrorBody::new(head)));
                } else if is_sse(head) {
                    // Nothing is expected back; do not hold a stream open.
                    self.abort_exchange(Some(ex));
                } else {
                    self.set_body(ex, Body::Discard);
                }
            }
            Owner::Listen => self.listen_head(now, ex, head),
            Owner::Close => {}
        }
    }

    /// A chunk of exchange `ex`'s response body. Every complete JSON-RPC
    /// text in it (SSE `message` events) goes to `deliver`.
    pub fn handle_body(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        data: &[u8],
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        let max_body = self.config.max_body;
        let Some(x) = self.exchanges.get_mut(&ex) else {
            return;
        };
        match &mut x.body {
            Body::Head | Body::Discard => return,
            Body::Sse => {
                let owner = x.owner.clone();
                return self.feed_sse(ex, &owner, data, deliver);
            }
            Body::Json(buf) if buf.len().saturating_add(data.len()) <= max_body => {
                return buf.extend_from_slice(data);
            }
            Body::Error(e) if e.text.len().saturating_add(data.len()) <= ERROR_BODY_LIMIT => {
                return e.text.extend_from_slice(data);
            }
            _ => {}
        }
        // Over a bound.
        let owner = x.owner.clone();
        let body = std::mem::replace(&mut x.body, Body::Discard);
        self.abort_exchange(Some(ex));
        match body {
            Body::Json(buf) => {
                if let Owner::Request(id) = owner {
                    self.fail_pending(
                        id,
                        RequestFailure::TooLarge {
                            what: "max_body",
                            limit: max_body,
                            size: buf.len().saturating_add(data.len()),
                        },
                    );
                }
            }
            Body::Error(mut e) => {
                let room = ERROR_BODY_LIMIT - e.text.len();
                e.text.extend_from_slice(&data[..room.min(data.len())]);
                e.truncated = true;
                if self.is_confirming(ex) {
                    return self.confirming_failed(Body::Error(e), "");
                }
                self.finish_error(owner, e, deliver);
            }
            _ => {}
        }
    }

    /// Exchange `ex`'s response ended normally.
    pub fn handle_end(&mut self, now: Instant, ex: ExchangeId, deliver: &mut dyn FnMut(&[u8])) {
        let Some(x) = self.exchanges.remove(&ex) else {
            return;
        };
        if self.is_confirming(ex) {
            return self.confirming_failed(x.body, "the response ended before its head");
        }
        match x.body {
            Body::Head => self.exchange_failed(
                now,
                x.owner,
                Body::Head,
                "the response ended before its head",
                deliver,
            ),
            Body::Discard => {}
            Body::Json(buf) => self.json_done(x.owner, buf, deliver),
            Body::Sse => self.stream_ended(now, x.owner, None),
            Body::Error(e) => self.finish_error(x.owner, e, deliver),
        }
        self.drained(now);
    }

    /// Exchange `ex` failed (connection refused, reset, bad framing…).
    pub fn handle_failed(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        error: &str,
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        let Some(x) = self.exchanges.remove(&ex) else {
            return;
        };
        if self.is_confirming(ex) {
            return self.confirming_failed(x.body, error);
        }
        self.exchange_failed(now, x.owner, x.body, error, deliver);
        self.drained(now);
    }

    // ---- heads ----------------------------------------------------------

    /// Exchange `ex` was redirected: `request` (exchange `next_exchange`)
    /// takes over its owner and its record.
    fn redirected(&mut self, ex: ExchangeId, follow: Redirects, request: HttpRequest, status: u16) {
        let Some(mut x) = self.exchanges.remove(&ex) else {
            return;
        };
        self.events.push_back(HttpEvent::Abort(ex));
        let next = self.next_id();
        debug_assert_eq!(next, request.exchange);
        if request.header("mcp-session-id").is_none() {
            x.session = None;
        }
        match &x.owner {
            Owner::Request(id) | Owner::Resume(id) => {
                if let Some(p) = self.pending.get_mut(id) {
                    p.exchange = Some(next);
                }
            }
            Owner::Listen => {
                if self.listener.state == ListenState::Open(ex) {
                    self.listener.state = ListenState::Open(next);
                }
            }
            Owner::Close => {
                if let Phase::Closing { delete, .. } = &mut self.phase {
                    *delete = Some(next);
                }
            }
            Owner::Notify(_) => {
                // The POST of notifications/initialized stays the one
                // confirmed where it was taken.
                if let Some(c) = self.confirming.as_mut() {
                    if c.exchange == Some(ex) {
                        c.exchange = Some(next);
                    }
                }
            }
        }
        self.note(format!(
            "following HTTP {status}: {} {} (redirect {} of at most {MAX_REDIRECTS})",
            request.method.as_str(),
            request.url,
            follow.hops(),
        ));
        x.follow = Some(follow);
        self.exchanges.insert(next, x);
        self.events.push_back(HttpEvent::Request(request));
    }

    /// A redirect of exchange `ex` is not followed: what it served fails.
    fn redirect_refused(&mut self, ex: ExchangeId, e: RedirectError) {
        let Some(x) = self.exchanges.remove(&ex) else {
            return;
        };
        self.events.push_back(HttpEvent::Abort(ex));
        match x.owner {
            Owner::Request(id) | Owner::Resume(id) => {
                self.fail_pending(id, RequestFailure::Redirect(e));
            }
            Owner::Notify(what) => self.diag(format!("{what} not delivered: {e}")),
            Owner::Listen => {
                // The same GET would meet the same redirect: no retry.
                self.settle_until = None;
                self.listener.state = ListenState::GaveUp;
                self.diag(format!("GET stream for server messages: {e}"));
            }
            Owner::Close => {
                self.diag(format!("DELETE of the session: {e}"));
                if matches!(self.phase, Phase::Closing { .. }) {
                    self.finish();
                }
            }
        }
    }

    /// A redirected exchange was answered with success: its URL is the
    /// endpoint from now on.
    fn moved(&mut self, follow: &Redirects) {
        let to = follow.url();
        if *to != self.url {
            self.note(format!(
                "the endpoint moved from {} to {to} (redirected there with success); \
                 later requests go there",
                self.url
            ));
            self.url = to.clone();
        }
    }

    /// Notes the `DPoP-Nonce` of an answer (RFC 9449 §8, §9) and, when the
    /// answer is a 401 `use_dpop_nonce` to a proof that did not carry that
    /// nonce, sends the message again (once: the retry carries it). True
    /// when it did.
    fn dpop_nonce_retry(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        owner: &Owner,
        head: &ResponseHead,
    ) -> bool {
        let Some(d) = self.dpop.as_ref() else {
            return false;
        };
        let Some(nonce) = head
            .header("dpop-nonce")
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim)
        else {
            return false;
        };
        d.key.remember_nonce(&self.url, nonce);
        let sent = self.exchanges.get(&ex).and_then(|x| x.dpop_nonce.clone());
        let values = head
            .header_all("www-authenticate")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>();
        let challenges =
            crate::exchange::challenge::parse_challenges(values.iter().map(String::as_str));
        if !wants_nonce(head.status, &challenges)
            || sent.is_none()
            || sent.as_deref() == Some(nonce)
            || d.key.nonce_for(&self.url).as_deref() != Some(nonce)
        {
            return false;
        }
        let resend = self.exchanges.get_mut(&ex).and_then(|x| x.resend.take());
        match owner {
            Owner::Request(id) => {
                let Some(out) = self.pending.get_mut(id).and_then(|p| p.message.clone()) else {
                    return false;
                };
                self.abort_exchange(Some(ex));
                self.pending.remove(id);
                self.note(format!(
                    "the server asked for a DPoP nonce; request {id} sent again with it"
                ));
                match self.phase {
                    Phase::Initializing { id: init, .. } if init == *id => {
                        self.post(out, false);
                    }
                    _ => self.submit(now, out),
                }
            }
            Owner::Notify(_) => {
                self.abort_exchange(Some(ex));
                if let Some(c) = self.confirming.as_mut().filter(|c| c.exchange == Some(ex)) {
                    c.exchange = None;
                    self.post_confirming();
                } else if let Some(out) = resend {
                    self.submit(now, out);
                }
            }
            Owner::Listen => {
                self.abort_exchange(Some(ex));
                self.settle_until = None;
                self.listener.state = ListenState::Off;
                self.open_listener();
            }
            Owner::Resume(_) | Owner::Close => return false,
        }
        true
    }

    /// A 401/403 that an authorization may cure: park what met it.
    fn auth_required(&mut self, ex: ExchangeId, owner: Owner, head: &ResponseHead) {
        let resend = self.exchanges.get_mut(&ex).and_then(|x| x.resend.take());
        self.abort_exchange(Some(ex));
        let mut request = None;
        match owner {
            Owner::Request(id) => {
                if let Some(p) = self.pending.remove(&id) {
                    match p.message {
                        Some(out) => {
                            self.park(out);
                            request = Some(id);
                        }
                        None => {
                            self.fail(id, RequestFailure::Auth(format!("HTTP {}", head.status)))
                        }
                    }
                }
            }
            Owner::Notify(_) => {
                if let Some(c) = self.confirming.as_mut().filter(|c| c.exchange == Some(ex)) {
                    // Sent again first, once authorized.
                    c.exchange = None;
                } else if let Some(out) = resend {
                    self.park(out);
                }
            }
            Owner::Listen => {
                self.settle_until = None;
                self.listener.state = ListenState::Off;
                self.listener_wants_auth = true;
            }
            Owner::Resume(_) | Owner::Close => {}
        }
        self.auth_hold = true;
        let challenges = head
            .header_all("www-authenticate")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        self.events.push_back(HttpEvent::AuthRequired {
            status: head.status,
            challenges,
            hints: ErrorBody::new(head).hints,
            request,
        });
    }

    fn set_body(&mut self, ex: ExchangeId, body: Body) {
        if let Some(x) = self.exchanges.get_mut(&ex) {
            x.body = body;
        }
    }

    fn request_head(&mut self, ex: ExchangeId, id: u64, head: &ResponseHead) {
        if !head.is_success() {
            return self.set_body(ex, Body::Error(ErrorBody::new(head)));
        }
        if matches!(self.phase, Phase::Initializing { id: init, .. } if init == id) {
            if let Err(message) = self.take_session_id(head) {
                return self.fatal(message);
            }
        }
        let media = head.media_type();
        let body = match media.as_deref() {
            Some("text/event-stream") => Body::Sse,
            // A missing Content-Type is read as JSON: an empty body (202)
            // then means "the response comes elsewhere".
            Some("application/json") | None => Body::Json(Vec::new()),
            Some(other) => {
                let failure = RequestFailure::Other(format!(
                    "unexpected Content-Type {:?} in the HTTP {} answer to request {id}",
                    preview(other.as_bytes(), 100),
                    head.status
                ));
                return self.fail_pending(id, failure);
            }
        };
        let sse = matches!(body, Body::Sse);
        self.set_body(ex, body);
        let config = &self.config;
        if let Some(p) = self.pending.get_mut(&id) {
            p.message = None;
            if sse && p.sse.is_none() {
                p.sse = Some(decoder(config));
            }
        }
    }

    fn resume_head(&mut self, now: Instant, ex: ExchangeId, id: u64, head: &ResponseHead) {
        if !head.is_success() {
            self.set_body(ex, Body::Error(ErrorBody::new(head)));
        } else if is_sse(head) {
            self.set_body(ex, Body::Sse);
        } else {
            self.abort_exchange(Some(ex));
            self.diag(format!(
                "resuming the stream of request {id}: HTTP {} without text/event-stream",
                head.status
            ));
            self.stream_ended(now, Owner::Resume(id), None);
        }
    }

    fn listen_head(&mut self, now: Instant, ex: ExchangeId, head: &ResponseHead) {
        self.settle_until = None;
        if head.status == 405 {
            self.abort_exchange(Some(ex));
            self.listener.state = ListenState::Disabled;
            // Allowed by the spec: not a warning.
            self.note("the server offers no GET stream for its messages (HTTP 405)");
        } else if head.is_success() && is_sse(head) {
            self.set_body(ex, Body::Sse);
        } else {
            self.abort_exchange(Some(ex));
            let why = if head.is_success() {
                format!("HTTP {} without text/event-stream", head.status)
            } else {
                format!("HTTP {} {}", head.status, head.reason)
            };
            self.listen_failed(now, why.trim_end());
        }
    }

    /// Reads the `Mcp-Session-Id` of the `initialize` answer.
    fn take_session_id(&mut self, head: &ResponseHead) -> Result<(), String> {
        let Some(value) = head.header("mcp-session-id") else {
            self.session_id = None;
            return Ok(());
        };
        if !value.is_empty() && value.iter().all(|b| (0x21..=0x7e).contains(b)) {
            self.session_id = Some(String::from_utf8_lossy(value).into_owned());
            self.session_origin = Some(self.url.clone());
            Ok(())
        } else {
            Err(format!(
                "the server sent an invalid Mcp-Session-Id {:?} (only visible ASCII 0x21-0x7E is allowed)",
                preview(value, 100)
            ))
        }
    }

    /// The first `initialize` POST got 400/404/405 (its exchange is over)
    /// and no 2026-07-28 refusal: hand everything over to the legacy
    /// transport.
    fn fall_back(&mut self, id: u64) {
        let mut resend = Vec::new();
        if let Some(out) = self.pending.remove(&id).and_then(|p| p.message) {
            resend.push((out.bytes, out.kind));
        }
        // The legacy transport has no era headers: they stay behind.
        resend.extend(
            std::mem::take(&mut self.held)
                .into_iter()
                .map(|o| (o.bytes, o.kind)),
        );
        self.abort_all();
        self.phase = Phase::Dead;
        self.events
            .push_back(HttpEvent::FallbackToLegacy { resend });
    }

    /// The POST of the `notifications/initialized` being confirmed ended
    /// without a 2xx head: refused (`body` is the error answer) — the
    /// session cannot start — or failed (`error`): sent again once, then
    /// given up. Either way nothing held goes out before it.
    fn confirming_failed(&mut self, body: Body, error: &str) {
        let (refused, why) = match body {
            Body::Error(e) => (true, e.message()),
            _ => (false, error.to_owned()),
        };
        let retried = self.confirming.as_mut().map(|c| &mut c.retried);
        match crate::transport::initialized_failed(refused, retried, &why) {
            None => {}
            Some(Err(fatal)) => self.fatal(fatal),
            Some(Ok(note)) => {
                self.diag(note);
                self.post_confirming();
            }
        }
    }

    /// A 404 answered an exchange carrying the session id of `generation`.
    fn expired_exchange(&mut self, owner: Owner, generation: u64) {
        match owner {
            Owner::Request(id) => match self.pending.remove(&id) {
                Some(p) if !p.resent && p.message.is_some() => {
                    // The server did not process it: send it again, once,
                    // in the new session.
                    if let Some(out) = p.message {
                        self.resend.push((id, out));
                    }
                }
                Some(_) => self.fail(id, RequestFailure::SessionExpired),
                None => {}
            },
            Owner::Resume(id) => self.fail_pending(id, RequestFailure::SessionExpired),
            Owner::Notify(what) => {
                self.diag(format!("{what} dropped: the session expired (HTTP 404)"));
            }
            Owner::Listen => {
                if self.listener.state != ListenState::Disabled {
                    self.listener.state = ListenState::Off;
                }
            }
            Owner::Close => {}
        }
        self.session_gone(generation);
        if self.phase == Phase::Ready && self.confirming.is_none() && !self.resend.is_empty() {
            // A late 404 of an old session: the new one is ready (else the
            // acceptance of its notifications/initialized sends it).
            self.flush_resends();
        }
    }

    // ---- bodies ---------------------------------------------------------

    /// Feeds an SSE chunk to the owner's decoder and handles its items.
    fn feed_sse(
        &mut self,
        ex: ExchangeId,
        owner: &Owner,
        data: &[u8],
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        let mut items = Vec::new();
        let config = &self.config;
        match owner {
            Owner::Request(id) | Owner::Resume(id) => match self.pending.get_mut(id) {
                Some(p) => p
                    .sse
                    .get_or_insert_with(|| decoder(config))
                    .feed(data, |item| items.push(item)),
                None => return self.abort_exchange(Some(ex)),
            },
            Owner::Listen => self.listener.sse.feed(data, |item| items.push(item)),
            Owner::Notify(_) | Owner::Close => return,
        }
        for item in items {
            if !self.exchanges.contains_key(&ex) {
                break;
            }
            match item {
                SseItem::Event(event) => self.sse_event(owner, event, deliver),
                SseItem::Error(error) => self.sse_error(ex, owner, &error),
                // A request's own stream was aborted at the overflow.
                SseItem::Skipped { size, glimpse } => {
                    if let Owner::Listen = owner {
                        let failure = RequestFailure::TooLarge {
                            what: "max_event",
                            limit: self.config.max_event,
                            size,
                        };
                        self.events
                            .push_back(HttpEvent::Skipped { glimpse, failure });
                    }
                }
            }
        }
    }

    fn sse_event(&mut self, owner: &Owner, event: SseEvent, deliver: &mut dyn FnMut(&[u8])) {
        match owner {
            Owner::Request(id) | Owner::Resume(id) => {
                if let Some(p) = self.pending.get_mut(id) {
                    p.attempts = 0;
                }
            }
            _ => {
                self.listener.failures = 0;
                self.listener.saw_event = true;
            }
        }
        if event.data.trim().is_empty() {
            // A priming event (an id for resumption, no message).
            return;
        }
        if event.event != "message" {
            return self.diag(format!(
                "ignored SSE event of type {:?}",
                preview(event.event.as_bytes(), 100)
            ));
        }
        self.deliver_text(event.data.as_bytes(), deliver);
    }

    fn sse_error(&mut self, ex: ExchangeId, owner: &Owner, error: &SseError) {
        match owner {
            // The dropped event is most likely the (large) response: waiting
            // for the deadline would only hide the cause.
            Owner::Request(id) | Owner::Resume(id) => {
                self.abort_exchange(Some(ex));
                let SseError::EventTooLarge { limit } = *error;
                let failure = RequestFailure::TooLarge {
                    what: "max_event",
                    limit,
                    size: limit.saturating_add(1),
                };
                self.fail_pending(*id, failure);
            }
            _ => self.diag(format!("GET stream: {error}")),
        }
    }

    /// Hands one JSON text to the engine, noting which of our requests it
    /// answers.
    fn deliver_text(&mut self, text: &[u8], deliver: &mut dyn FnMut(&[u8])) {
        if !self.pending.is_empty() {
            if let Ok(text) = std::str::from_utf8(text) {
                let mut ids = Vec::new();
                response_ids(text, |id| ids.push(id));
                for id in ids {
                    if let Phase::Initializing { id: init, answered } = &mut self.phase {
                        *answered |= *init == id;
                    }
                    if let Some(p) = self.pending.get_mut(&id) {
                        p.answered = true;
                        p.resume_at = None;
                        if p.exchange.is_none() {
                            self.pending.remove(&id);
                        }
                    }
                }
            }
        }
        deliver(text);
    }

    /// A request's `application/json` answer is complete.
    fn json_done(&mut self, owner: Owner, body: Vec<u8>, deliver: &mut dyn FnMut(&[u8])) {
        let Owner::Request(id) = owner else {
            return;
        };
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        p.exchange = None;
        if body.trim_ascii().is_empty() {
            return self.diag(format!(
                "the server answered request {id} without a body; its response can only come on another stream"
            ));
        }
        self.deliver_text(&body, deliver);
        if self.pending.contains_key(&id) {
            let failure = RequestFailure::Other(format!(
                "the JSON answer to request {id} is not its response: {}",
                preview(body.trim_ascii(), 200)
            ));
            self.fail_pending(id, failure);
        }
    }

    /// A non-2xx answer has been read (whole, or up to the bound).
    fn finish_error(&mut self, owner: Owner, e: ErrorBody, deliver: &mut dyn FnMut(&[u8])) {
        if let (Owner::Request(id), Some(init)) = (&owner, self.refused_init) {
            if *id == init {
                self.refused_init = None;
                let modern = !e.truncated
                    && error_response_for(&e.text, init)
                        .is_some_and(|r| r.code == UNSUPPORTED_PROTOCOL_VERSION);
                if !modern {
                    return self.fall_back(init);
                }
            }
        }
        match owner {
            Owner::Request(id) | Owner::Resume(id) => {
                if !e.truncated && error_response_for(&e.text, id).is_some() {
                    if let Some(p) = self.pending.get_mut(&id) {
                        p.exchange = None;
                    }
                    self.deliver_text(&e.text, deliver);
                } else {
                    let failure = RequestFailure::Http {
                        status: e.status,
                        message: e.message(),
                    };
                    self.fail_pending(id, failure);
                }
            }
            Owner::Notify(what) => {
                let message = e.message();
                self.diag(format!("the server refused a {what}: {message}"));
            }
            Owner::Listen | Owner::Close => {}
        }
    }

    // ---- ends and failures ----------------------------------------------

    fn exchange_failed(
        &mut self,
        now: Instant,
        owner: Owner,
        body: Body,
        error: &str,
        deliver: &mut dyn FnMut(&[u8]),
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
    fn stream_ended(&mut self, now: Instant, owner: Owner, error: Option<&str>) {
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
    fn listen_failed(&mut self, now: Instant, why: &str) {
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

impl ErrorBody {
    fn new(head: &ResponseHead) -> Self {
        let mut hints = String::new();
        for name in ["WWW-Authenticate", "Mcp-Auth-Server"] {
            if let Some(value) = head.header(name) {
                hints.push_str(&format!(" ({name}: {})", preview(value, HINT_MAX)));
            }
        }
        ErrorBody {
            status: head.status,
            reason: head.reason.clone(),
            text: Vec::new(),
            truncated: false,
            hints,
        }
    }

    /// `HTTP <status>: <body or reason>` and the hints.
    fn message(&self) -> String {
        let mut detail = preview(self.text.trim_ascii(), ERROR_TEXT_MAX);
        if self.truncated && !detail.ends_with('…') {
            detail.push('…');
        }
        if detail.is_empty() {
            detail = preview(self.reason.trim().as_bytes(), ERROR_TEXT_MAX);
        }
        let mut message = if detail.is_empty() {
            format!("HTTP {}", self.status)
        } else {
            format!("HTTP {}: {detail}", self.status)
        };
        message.push_str(&self.hints);
        message
    }
}

fn is_sse(head: &ResponseHead) -> bool {
    head.media_type().as_deref() == Some("text/event-stream")
}

/// Calls `f` with the id of every response to one of our requests in a JSON
/// text (a message or a batch).
fn response_ids(text: &str, mut f: impl FnMut(u64)) {
    let mut one = |text: &str| {
        if let Ok(Message::Response {
            id: RequestId::Number(n),
            ..
        }) = parse_message(text)
        {
            if let Ok(n) = u64::try_from(n) {
                f(n);
            }
        }
    };
    if text.trim_start().starts_with('[') {
        if let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(text) {
            for item in items {
                one(item.get());
            }
        }
    } else {
        one(text);
    }
}

/// The JSON-RPC error a body answers our request `id` with, if it is one.
fn error_response_for(body: &[u8], id: u64) -> Option<ErrorObject> {
    let text = std::str::from_utf8(body).ok()?;
    match parse_message(text) {
        Ok(Message::Response {
            id: RequestId::Number(n),
            outcome: Err(e),
        }) if u64::try_from(n) == Ok(id) => Some(e),
        _ => None,
    }
}

/// The 2026-07-28 era's "unsupported protocol version" error code (the
/// transport floor is below `modern`, which names it too).
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// 401, or 403 whose `Bearer` challenge says `insufficient_scope`.
fn wants_authorization(head: &ResponseHead) -> bool {
    match head.status {
        401 => true,
        403 => {
            let values = head
                .header_all("www-authenticate")
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect::<Vec<_>>();
            let challenges =
                crate::exchange::challenge::parse_challenges(values.iter().map(String::as_str));
            crate::exchange::challenge::bearer(&challenges)
                .is_some_and(|c| c.param("error") == Some("insufficient_scope"))
        }
        _ => false,
    }
}
