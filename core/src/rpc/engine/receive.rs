//! Received messages: framing and parsing, correlation of responses, the
//! server's requests, progress and cancellation notifications.

use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{our_key, Engine, F_PROGRESS, F_RESET};
use crate::codec::jsonl::Line;
use crate::codec::scan;
use crate::codec::scan::ShapeCheck;
use crate::mcp::methods::{notifications, MethodId};
use crate::rpc::error::RequestError;
use crate::rpc::message::{
    self, ErrorObject, Frame, InvalidReason, Message, ParseError, RequestId, INVALID_REQUEST,
};
use crate::rpc::output::{Diagnostic, Output, Progress};
use crate::rpc::response::read_response;

/// A message reader: `parse_message`, or its general path alone.
type Parse = for<'a> fn(&'a str) -> Result<Message<'a>, ParseError>;

/// Bytes of the received text quoted in a diagnostic.
const PREVIEW_BYTES: usize = 200;

#[derive(Deserialize)]
struct ProgressParams<'a> {
    #[serde(rename = "progressToken", borrow)]
    token: &'a RawValue,
    progress: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
    #[serde(default, borrow)]
    reason: Option<&'a RawValue>,
}

impl Engine {
    /// Handles ONE received JSON text (a JSONL line, an SSE `data`, an HTTP
    /// JSON body). Whatever it holds, nothing panics: every fault becomes a
    /// `Diagnostic` output and a counter.
    ///
    /// Timeouts are not checked here: a response handled before
    /// `handle_timeout` saw its deadline completes the request.
    ///
    /// Gives the id of the response it was, if it was one with a
    /// non-negative integer id (ours or not, late or not; a batch gives
    /// `None`): a transport that follows its requests learns from it which
    /// one is answered without reading the text a second time.
    pub fn handle_message(&mut self, now: Instant, json: &[u8]) -> Option<u64> {
        let text = self.text_of(json)?;
        // The common response first (its reader leaves a text with a
        // surrogate escape to the general way, which mends lone halves).
        match read_response(text, |id| self.result_check(id)) {
            Some(message) => self.dispatch(now, text, Ok(message)),
            None => self.handle_general(now, text),
        }
    }

    /// [`handle_message`](Self::handle_message) for one line of a stream.
    /// A line whose buffer is given ([`Line::Owned`]: a large one, or an
    /// SSE event's data) and that is the common response to a pending
    /// request becomes its result in place: a large answer is held once,
    /// not copied out. Gives what `handle_message` gives.
    pub fn handle_line(&mut self, now: Instant, line: Line<'_>) -> Option<u64> {
        let json = match line {
            Line::Borrowed(json) => return self.handle_message(now, json),
            Line::Owned(json) => json,
        };
        let text = self.text_of(&json)?;
        let (id, start, end) = match read_response(text, |id| self.result_check(id)) {
            Some(Message::Response {
                id,
                outcome: Ok(raw),
            }) if self.pending.contains(our_key(&id)) => {
                let start = raw.get().as_ptr() as usize - json.as_ptr() as usize;
                (id, start, start + raw.get().len())
            }
            Some(message) => return self.dispatch(now, text, Ok(message)),
            None => return self.handle_general(now, text),
        };
        let mut json = json;
        json.truncate(end);
        json.drain(..start);
        // Checked as UTF-8 and JSON above (and cut at ASCII bytes), so
        // this cannot fail; were it to, the request fails rather than
        // waits for its timeout.
        let answered = answered(&id);
        match String::from_utf8(json).ok().and_then(scan::raw_owned) {
            Some(raw) => self.on_response(id, Ok(move || raw)),
            None => {
                let key = our_key(&id);
                if self.pending.remove(key).is_some() {
                    let message = "the answer's result could not be kept".into();
                    self.complete(key, Err(RequestError::Transport { message }));
                }
            }
        }
        answered
    }

    /// The result check of pending request `id`, if it has one.
    fn result_check(&self, id: i64) -> Option<ShapeCheck> {
        let id = u64::try_from(id).ok()?;
        self.pending
            .get(id)
            .and_then(|p| p.method)
            .and_then(MethodId::result_check)
    }

    /// A received text as UTF-8, unless the engine is closed (nothing is
    /// read then) or it is not UTF-8 (reported).
    fn text_of<'a>(&mut self, json: &'a [u8]) -> Option<&'a str> {
        if self.closed {
            return None;
        }
        match message::utf8(json) {
            Ok(text) => Some(text),
            Err(err) => {
                self.parse_failed(err, json);
                None
            }
        }
    }

    /// A text that is not the common response (the fast reader was tried
    /// on it): lone surrogate halves mended, then framed and read the
    /// general way.
    fn handle_general(&mut self, now: Instant, text: &str) -> Option<u64> {
        // A lone UTF-16 surrogate escape (JavaScript's JSON.stringify of a
        // sliced emoji) is mended here, once, for every reader after.
        let repaired = message::repair_lone_surrogates(text);
        let (text, parse): (&str, Parse) = match &repaired {
            Some(text) => {
                self.stats.surrogates_repaired += 1;
                (text.as_str(), message::parse_message)
            }
            // Not the common response: read the general way at once.
            None => (text, message::parse_message_slow),
        };
        match message::frame_text(text, self.config.accept_batches) {
            Ok(Frame::Single(text)) => self.dispatch(now, text, parse(text)),
            Ok(Frame::Batch(items)) => {
                self.stats.batches += 1;
                for item in items {
                    let text = item.get();
                    self.dispatch(now, text, message::parse_message(text));
                }
                None
            }
            Err(err) => {
                self.parse_failed(err, text.as_bytes());
                None
            }
        }
    }

    fn parse_failed(&mut self, err: ParseError, text: &[u8]) {
        let preview = crate::codec::preview(text, PREVIEW_BYTES);
        match err {
            ParseError::Malformed(error) => {
                self.stats.malformed += 1;
                self.diagnostic(Diagnostic::Malformed { error, preview });
            }
            ParseError::Invalid(invalid) => {
                self.stats.invalid += 1;
                if let Some(id) = invalid.reply_to {
                    let error = ErrorObject::new(INVALID_REQUEST, "Invalid Request");
                    self.send_response(id, Err(&error));
                }
                self.diagnostic(Diagnostic::Invalid {
                    reason: invalid.reason,
                    preview,
                });
            }
        }
    }

    /// One message read from `text` (or why it could not be): the id of
    /// the response it was (see [`handle_message`](Self::handle_message)).
    fn dispatch(
        &mut self,
        now: Instant,
        text: &str,
        read: Result<Message<'_>, ParseError>,
    ) -> Option<u64> {
        match read {
            Ok(Message::Response { id, outcome }) => {
                let answered = answered(&id);
                self.on_response(id, outcome.map(|raw| move || raw.to_owned()));
                return answered;
            }
            Ok(Message::Request { id, method, params }) => {
                self.on_request(text, id, &method, params)
            }
            Ok(Message::Notification { method, params }) => {
                self.on_notification(now, &method, params)
            }
            Err(err) => self.parse_failed(err, text.as_bytes()),
        }
        None
    }

    /// A response: its result (made owned only if a request waits for
    /// it) or its error.
    fn on_response(
        &mut self,
        id: RequestId,
        outcome: Result<impl FnOnce() -> Box<RawValue>, ErrorObject>,
    ) {
        let key = our_key(&id);
        if self.pending.remove(key).is_some() {
            let outcome = match outcome {
                Ok(result) => {
                    self.stats.completed_ok += 1;
                    Ok(result())
                }
                Err(error) => {
                    self.stats.completed_error += 1;
                    Err(RequestError::Remote(error))
                }
            };
            self.complete(key, outcome);
        } else if key < self.next_id {
            self.stats.late_responses += 1;
        } else {
            self.stats.unknown_responses += 1;
            self.diagnostic(Diagnostic::UnknownResponse { id });
        }
    }

    fn on_request(&mut self, text: &str, id: RequestId, method: &str, params: Option<&RawValue>) {
        if self.server_open.contains(&id) {
            // Answering would give the server two responses for one id.
            self.stats.invalid += 1;
            let preview = crate::codec::preview(text.as_bytes(), PREVIEW_BYTES);
            self.diagnostic(Diagnostic::Invalid {
                reason: InvalidReason::DuplicateRequestId,
                preview,
            });
            return;
        }
        if method == MethodId::Ping.name() {
            self.stats.pings_answered += 1;
            self.send_response(id, Ok(empty_object()));
            return;
        }
        if !self.config.handles(method) {
            self.stats.methods_not_found += 1;
            let error = ErrorObject::method_not_found();
            self.send_response(id, Err(&error));
            return;
        }
        if self.server_open.len() >= self.config.max_server_requests {
            self.stats.server_requests_rejected += 1;
            let error = ErrorObject::internal("Too many concurrent requests");
            self.send_response(id.clone(), Err(&error));
            self.diagnostic(Diagnostic::ServerRequestRejected {
                id,
                method: method.to_owned(),
            });
            return;
        }
        if !self.withdrawn.is_empty() {
            // The server reuses an id it withdrew: the new request is live.
            self.withdrawn.retain(|w| *w != id);
        }
        self.stats.server_requests += 1;
        self.server_open.insert(id.clone());
        self.out.push_back(Output::ServerRequest {
            id,
            method: method.to_owned(),
            params: params.map(ToOwned::to_owned),
        });
    }

    fn on_notification(&mut self, now: Instant, method: &str, params: Option<&RawValue>) {
        match method {
            notifications::PROGRESS => self.on_progress(now, params),
            notifications::CANCELLED => self.on_server_cancelled(params),
            _ => {
                self.stats.notifications_received += 1;
                self.out.push_back(Output::Notification {
                    method: method.to_owned(),
                    params: params.map(ToOwned::to_owned),
                });
            }
        }
    }

    fn on_progress(&mut self, now: Instant, params: Option<&RawValue>) {
        let parsed = params.and_then(|p| serde_json::from_str::<ProgressParams<'_>>(p.get()).ok());
        let key = match parsed.as_ref().map(|p| message::parse_id(p.token)) {
            Some(Ok(RequestId::Number(n))) if n >= 0 => n as u64,
            _ => u64::MAX,
        };
        let Some(parsed) = parsed else {
            self.stats.progress_ignored += 1;
            return;
        };
        let Some(pending) = self.pending.get_mut(key) else {
            return self.lingering_progress(key, parsed);
        };
        // `!(a > b)` also rejects a NaN, should one ever get through.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let not_increasing = !(parsed.progress > pending.last_progress);
        if pending.flags & F_PROGRESS == 0 || not_increasing {
            self.stats.progress_ignored += 1;
            return;
        }
        pending.last_progress = parsed.progress;
        let mut new_deadline = None;
        if pending.flags & F_RESET != 0 {
            let deadline = pending.deadline_from(now);
            if deadline != pending.deadline {
                pending.deadline = deadline;
                new_deadline = deadline;
            }
        }
        if let Some(deadline) = new_deadline {
            self.push_deadline(deadline, key);
        }
        self.stats.progress_delivered += 1;
        self.out.push_back(Output::Progress {
            id: key,
            progress: Progress {
                progress: parsed.progress,
                total: parsed.total,
                message: parsed.message,
                task: None,
            },
        });
    }

    /// Progress for a token kept after its request completed.
    fn lingering_progress(&mut self, key: u64, parsed: ProgressParams<'_>) {
        let Some(last) = self.lingering.get_mut(&key) else {
            self.stats.progress_ignored += 1;
            return;
        };
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(parsed.progress > *last) {
            self.stats.progress_ignored += 1;
            return;
        }
        *last = parsed.progress;
        self.stats.progress_delivered += 1;
        self.out.push_back(Output::Progress {
            id: key,
            progress: Progress {
                progress: parsed.progress,
                total: parsed.total,
                message: parsed.message,
                task: None,
            },
        });
    }

    fn on_server_cancelled(&mut self, params: Option<&RawValue>) {
        let parsed = params.and_then(|p| serde_json::from_str::<CancelledParams<'_>>(p.get()).ok());
        let Some(parsed) = parsed else {
            self.stats.cancellations_ignored += 1;
            return;
        };
        let Ok(id) = message::parse_id(parsed.request_id) else {
            self.stats.cancellations_ignored += 1;
            return;
        };
        if !self.server_open.remove(&id) {
            self.stats.cancellations_ignored += 1;
            return;
        }
        if self.withdrawn.len() >= self.config.max_server_requests.max(16) {
            self.withdrawn.pop_front();
        }
        self.withdrawn.push_back(id.clone());
        self.stats.server_requests_withdrawn += 1;
        let reason = parsed
            .reason
            .and_then(message::parse_str)
            .map(|r| r.into_owned());
        self.out
            .push_back(Output::ServerRequestCancelled { id, reason });
    }
}

fn empty_object() -> &'static RawValue {
    // A valid JSON text, so this never fails; `{}` is the ping result.
    const EMPTY: &str = "{}";
    serde_json::from_str::<&RawValue>(EMPTY).unwrap_or(RawValue::NULL)
}

/// A response's id as [`Engine::handle_message`] gives it: its pending-map
/// key, when it can be one of ours (a non-negative integer).
fn answered(id: &RequestId) -> Option<u64> {
    Some(our_key(id)).filter(|&key| key != u64::MAX)
}
