//! Response bodies: SSE streams and their events, JSON answers and error
//! answers, and the JSON-RPC texts handed to the engine.

use crate::codec::jsonl::Line;
use serde_json::value::RawValue;

use crate::codec::preview;
use crate::codec::sse::{SseError, SseEvent, SseItem};
use crate::rpc::{parse_message, ErrorObject, Message, RequestId};
use crate::transport::http::{decoder, ErrorBody, HttpEvent, Owner, Phase, StreamableHttp};
use crate::transport::{ExchangeId, RequestFailure};

impl StreamableHttp {
    /// Feeds an SSE chunk to the owner's decoder and handles its items.
    pub(super) fn feed_sse(
        &mut self,
        ex: ExchangeId,
        owner: &Owner,
        data: &[u8],
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
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

    fn sse_event(
        &mut self,
        owner: &Owner,
        event: SseEvent,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) {
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
        // The event's own buffer goes to the engine: a large result is
        // then kept in it, not copied out.
        self.deliver_text(Line::Owned(event.data.into_bytes()), deliver);
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
    /// answers: the one whose response the engine read in it (the text
    /// is read once), or, in a batch, each whose response is in it.
    fn deliver_text(&mut self, text: Line<'_>, deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>) {
        if self.pending.is_empty() {
            deliver(text);
            return;
        }
        if text.bytes().trim_ascii_start().first() != Some(&b'[') {
            let answered = deliver(text);
            self.answered(answered);
            return;
        }
        let mut ids = Vec::new();
        if let Ok(text) = std::str::from_utf8(text.bytes()) {
            response_ids(text, |id| ids.push(id));
        }
        deliver(text);
        ids.into_iter().for_each(|id| self.answered(Some(id)));
    }

    /// The response to request `id` was delivered.
    fn answered(&mut self, id: Option<u64>) {
        let Some(id) = id else { return };
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

    /// A request's `application/json` answer is complete.
    pub(super) fn json_done(
        &mut self,
        owner: Owner,
        body: Vec<u8>,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) {
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
        // Lent, not handed over: the body grew by doubling, and the
        // engine would shrink it to the result (dearer with glibc than
        // the copy, see BENCHMARKS.md).
        self.deliver_text(Line::Borrowed(&body), deliver);
        if self.pending.contains_key(&id) {
            let failure = RequestFailure::Other(format!(
                "the JSON answer to request {id} is not its response: {}",
                preview(body.trim_ascii(), 200)
            ));
            self.fail_pending(id, failure);
        }
    }

    /// A non-2xx answer has been read (whole, or up to the bound).
    pub(super) fn finish_error(
        &mut self,
        owner: Owner,
        e: ErrorBody,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) {
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
                    self.deliver_text(Line::Borrowed(&e.text), deliver);
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
