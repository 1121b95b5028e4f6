//! Inputs of the legacy HTTP+SSE transport: heads, bodies, ends and
//! failures of the event stream and of the POSTs, the stream's events and
//! its `endpoint`.

use crate::codec::jsonl::Line;
use std::time::Instant;

use super::{http_failure, Answer, LegacyEvent, LegacySse, Phase, Refusal, Stream, QUOTE_BYTES};
use crate::codec::preview;
use crate::codec::sse::{SseEnd, SseEvent, SseItem};
use crate::transport::{ExchangeId, RequestFailure, ResponseHead};

impl LegacySse {
    /// The head of exchange `ex` arrived.
    pub fn handle_head(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        head: &ResponseHead,
        _deliver: &mut dyn FnMut(Line<'_>),
    ) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            if !matches!(self.stream, Stream::Opening) {
                return;
            }
            if let Some(mut follow) = self.stream_follow.take() {
                let next = ExchangeId(self.next_exchange);
                let allow = self.config.allow_cross_origin_redirects;
                match follow.follow(head, allow, next) {
                    Some(Ok(request)) => {
                        self.events.push_back(LegacyEvent::Abort(ex));
                        self.stream_exchange = self.next_exchange();
                        self.stream_follow = Some(follow);
                        self.events.push_back(LegacyEvent::Request(request));
                        return;
                    }
                    Some(Err(e)) => return self.fatal(format!("the SSE stream: {e}")),
                    None if follow.hops() > 0 && head.is_success() => {
                        self.url = follow.url().clone();
                    }
                    None => {}
                }
            }
            let media_type = head.media_type();
            if head.is_success() && media_type.as_deref() == Some("text/event-stream") {
                self.stream = Stream::Open;
                return;
            }
            let mut refusal = Refusal::new(head);
            if head.is_success() {
                refusal.hints.insert(
                    0,
                    format!(
                        "expected Content-Type text/event-stream, got {}",
                        media_type.map_or_else(
                            || String::from("none"),
                            |m| preview(m.as_bytes(), QUOTE_BYTES)
                        )
                    ),
                );
            }
            self.stream = Stream::Refused(refusal);
        } else if let Some(post) = self.posts.get_mut(&ex) {
            if let Some(mut follow) = post.follow.take() {
                let next = ExchangeId(self.next_exchange);
                let allow = self.config.allow_cross_origin_redirects;
                match follow.follow(head, allow, next) {
                    Some(Ok(request)) => {
                        let Some(mut post) = self.posts.remove(&ex) else {
                            return;
                        };
                        self.events.push_back(LegacyEvent::Abort(ex));
                        let next = self.next_exchange();
                        post.follow = Some(follow);
                        self.posts.insert(next, post);
                        if let Some(c) = self.confirming.as_mut() {
                            if c.exchange == ex {
                                c.exchange = next;
                            }
                        }
                        self.events.push_back(LegacyEvent::Request(request));
                        return;
                    }
                    Some(Err(e)) => {
                        if let Some(post) = self.posts.remove(&ex) {
                            self.events.push_back(LegacyEvent::Abort(ex));
                            self.post_failed(ex, post, RequestFailure::Redirect(e));
                        }
                        return;
                    }
                    None if follow.hops() > 0 && head.is_success() => {
                        // Later messages go where this one was taken.
                        self.endpoint = Some(follow.url().clone());
                    }
                    None => {}
                }
            }
            let Some(post) = self.posts.get_mut(&ex) else {
                return;
            };
            if matches!(post.answer, Answer::Waiting) {
                post.answer = if head.is_success() {
                    Answer::Draining(0)
                } else {
                    Answer::Refused(Refusal::new(head))
                };
                if head.is_success() && self.is_confirming(ex) {
                    // Accepted: what waited for it may go now.
                    self.confirming = None;
                    self.flush();
                }
            }
        }
    }

    /// Body bytes of exchange `ex`; each `message` event of the stream goes
    /// to `deliver`.
    pub fn handle_body(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        data: &[u8],
        deliver: &mut dyn FnMut(Line<'_>),
    ) {
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            match &mut self.stream {
                Stream::Open => {
                    // The decoder is moved out while it calls back into self.
                    let mut decoder = std::mem::take(&mut self.decoder);
                    decoder.feed(data, |item| self.on_item(item, deliver));
                    self.decoder = decoder;
                }
                Stream::Refused(refusal) => {
                    if refusal.push(data) {
                        let message = refusal.message();
                        self.fatal(message);
                    }
                }
                Stream::Opening | Stream::Gone => {}
            }
            return;
        }
        let Some(post) = self.posts.get_mut(&ex) else {
            return;
        };
        match &mut post.answer {
            Answer::Waiting => {}
            Answer::Draining(seen) => {
                *seen = seen.saturating_add(data.len());
                if *seen > self.config.max_body {
                    let limit = self.config.max_body;
                    self.posts.remove(&ex);
                    self.events.push_back(LegacyEvent::Abort(ex));
                    self.events.push_back(LegacyEvent::Diagnostic(format!(
                        "the answer to POST {ex} exceeds {limit} bytes; stopped reading it"
                    )));
                }
            }
            Answer::Refused(refusal) => {
                if refusal.push(data) {
                    let failure = http_failure(refusal);
                    if let Some(post) = self.posts.remove(&ex) {
                        self.events.push_back(LegacyEvent::Abort(ex));
                        self.post_failed(ex, post, failure);
                    }
                }
            }
        }
    }

    /// Exchange `ex` ended normally.
    pub fn handle_end(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        _deliver: &mut dyn FnMut(Line<'_>),
    ) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            let message = match std::mem::replace(&mut self.stream, Stream::Gone) {
                Stream::Open => {
                    let mut message = if self.endpoint.is_some() {
                        String::from("SSE stream closed by the server")
                    } else {
                        String::from(
                            "SSE stream closed by the server before it sent an `endpoint` event",
                        )
                    };
                    if self.decoder.finish() == SseEnd::IncompleteEvent {
                        message.push_str(" (an incomplete event was discarded)");
                    }
                    message
                }
                Stream::Refused(refusal) => refusal.message(),
                Stream::Opening => String::from("SSE stream ended without a response"),
                Stream::Gone => return,
            };
            self.fatal(message);
            return;
        }
        let Some(post) = self.posts.remove(&ex) else {
            return;
        };
        match post.answer {
            Answer::Draining(_) => {}
            Answer::Waiting => {
                let failure = RequestFailure::Other(String::from(
                    "the server closed the connection without an answer",
                ));
                self.post_failed(ex, post, failure);
            }
            Answer::Refused(ref refusal) => {
                let failure = http_failure(refusal);
                self.post_failed(ex, post, failure);
            }
        }
    }

    /// Exchange `ex` failed (connection refused, reset, bad framing…).
    pub fn handle_failed(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        error: &str,
        _deliver: &mut dyn FnMut(Line<'_>),
    ) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            let message = match std::mem::replace(&mut self.stream, Stream::Gone) {
                Stream::Open if self.endpoint.is_none() => {
                    format!("{error} (the server sent no `endpoint` event before)")
                }
                Stream::Open | Stream::Opening => error.to_string(),
                Stream::Refused(refusal) => refusal.message(),
                Stream::Gone => return,
            };
            self.fatal(message);
            return;
        }
        let Some(post) = self.posts.remove(&ex) else {
            return;
        };
        let failure = match &post.answer {
            Answer::Refused(refusal) => http_failure(refusal),
            Answer::Waiting | Answer::Draining(_) => RequestFailure::Other(error.to_string()),
        };
        self.post_failed(ex, post, failure);
    }

    /// One item decoded from the stream.
    fn on_item(&mut self, item: SseItem, deliver: &mut dyn FnMut(Line<'_>)) {
        if self.phase != Phase::Running {
            return;
        }
        match item {
            SseItem::Event(SseEvent { event, data, .. }) => match event.as_str() {
                "message" => {
                    if !data.trim().is_empty() {
                        deliver(Line::Borrowed(data.as_bytes()));
                    }
                }
                "endpoint" => self.on_endpoint(&data),
                other => self.events.push_back(LegacyEvent::Diagnostic(format!(
                    "ignored an SSE event of type `{}` ({} bytes of data)",
                    preview(other.as_bytes(), QUOTE_BYTES),
                    data.len()
                ))),
            },
            SseItem::Error(e) => self
                .events
                .push_back(LegacyEvent::Diagnostic(format!("SSE stream: {e}"))),
            SseItem::Skipped { size, glimpse } => {
                let failure = RequestFailure::TooLarge {
                    what: "max_event",
                    limit: self.config.max_event,
                    size,
                };
                self.events
                    .push_back(LegacyEvent::Skipped { glimpse, failure });
            }
        }
    }

    /// An `endpoint` event: the first one says where to POST.
    fn on_endpoint(&mut self, data: &str) {
        let reference = data.trim();
        if let Some(endpoint) = &self.endpoint {
            let message = format!(
                "ignored a second `endpoint` event (`{}`); messages still go to {endpoint}",
                preview(reference.as_bytes(), QUOTE_BYTES)
            );
            self.events.push_back(LegacyEvent::Diagnostic(message));
            return;
        }
        if reference.is_empty() {
            self.fatal(String::from("the server's `endpoint` event names no URI"));
            return;
        }
        let endpoint = match self.url.join(reference) {
            Ok(endpoint) => endpoint,
            Err(e) => {
                self.fatal(format!("the server's `endpoint` event is not usable: {e}"));
                return;
            }
        };
        if !endpoint.same_origin(&self.url) {
            let message = format!(
                "refused the server's endpoint {endpoint}: it is not on the origin of the SSE \
                 stream {} (scheme, host and port must match)",
                self.url
            );
            self.fatal(message);
            return;
        }
        self.endpoint = Some(endpoint);
        self.flush();
    }
}
