//! Inputs of the Streamable HTTP transport: response heads, body chunks,
//! ends and failures of its exchanges, and what they mean for requests,
//! the listener, the session and the close.
//!
//! The entry points (`handle_head`, `handle_body`, `handle_end`,
//! `handle_failed`) are here; what follows them has a file by role:
//! [`heads`], [`bodies`], [`ends`].

mod bodies;
mod ends;
mod heads;

use crate::codec::jsonl::Line;
use std::time::Instant;

use super::{
    Body, ErrorBody, Owner, Phase, StreamableHttp, ERROR_BODY_LIMIT, ERROR_TEXT_MAX, HINT_MAX,
};
use crate::codec::preview;
use crate::transport::{ExchangeId, RequestFailure, ResponseHead};

impl StreamableHttp {
    /// The head of exchange `ex`'s response arrived. Unknown or aborted
    /// exchanges are ignored. (`deliver` is part of the common input
    /// signature; a head alone never carries a message.)
    pub fn handle_head(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        head: &ResponseHead,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
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
        _deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
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
    /// text in it (SSE `message` events) goes to `deliver`, which gives
    /// the id of the response the text was, if it was one
    /// ([`Engine::handle_line`]): that request is answered.
    ///
    /// [`Engine::handle_line`]: crate::rpc::Engine::handle_line
    pub fn handle_body(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        data: &[u8],
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
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
    pub fn handle_end(
        &mut self,
        now: Instant,
        ex: ExchangeId,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) {
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
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
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
