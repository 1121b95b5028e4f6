//! Response heads: redirects followed or refused, DPoP nonces and
//! authorizations, what a head means for a request, a resumption or the
//! listener, the session id, the legacy fallback and a session's end.

use std::time::Instant;

use super::is_sse;
use crate::codec::preview;
use crate::exchange::dpop::wants_nonce;
use crate::exchange::redirect::{Redirects, MAX_REDIRECTS};
use crate::transport::http::{
    decoder, Body, ErrorBody, HttpEvent, ListenState, Owner, Phase, StreamableHttp,
};
use crate::transport::{ExchangeId, HttpRequest, RedirectError, RequestFailure, ResponseHead};

impl StreamableHttp {
    /// Exchange `ex` was redirected: `request` (exchange `next_exchange`)
    /// takes over its owner and its record.
    pub(super) fn redirected(
        &mut self,
        ex: ExchangeId,
        follow: Redirects,
        request: HttpRequest,
        status: u16,
    ) {
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
    pub(super) fn redirect_refused(&mut self, ex: ExchangeId, e: RedirectError) {
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
    pub(super) fn moved(&mut self, follow: &Redirects) {
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
    pub(super) fn dpop_nonce_retry(
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
    pub(super) fn auth_required(&mut self, ex: ExchangeId, owner: Owner, head: &ResponseHead) {
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

    pub(super) fn set_body(&mut self, ex: ExchangeId, body: Body) {
        if let Some(x) = self.exchanges.get_mut(&ex) {
            x.body = body;
        }
    }

    pub(super) fn request_head(&mut self, ex: ExchangeId, id: u64, head: &ResponseHead) {
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

    pub(super) fn resume_head(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        id: u64,
        head: &ResponseHead,
    ) {
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

    pub(super) fn listen_head(&mut self, now: Instant, ex: ExchangeId, head: &ResponseHead) {
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
    pub(super) fn fall_back(&mut self, id: u64) {
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
    pub(super) fn confirming_failed(&mut self, body: Body, error: &str) {
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
    pub(super) fn expired_exchange(&mut self, owner: Owner, generation: u64) {
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
}
