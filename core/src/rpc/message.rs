//! The JSON-RPC 2.0 message model: ids, error objects, and the classification
//! of one incoming JSON text into request / notification / response / invalid.
//!
//! Parsing borrows from the input: `params` and `result` stay `&RawValue`
//! slices of the received text until a caller asks for a typed value.
//! Classification never fails with a panic; every way a text can fail to be a
//! JSON-RPC message has a [`InvalidReason`].

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Invalid JSON was received (JSON-RPC standard code).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (JSON-RPC standard code).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (JSON-RPC standard code).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (JSON-RPC standard code).
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error (JSON-RPC standard code).
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC request id: an integer or a string (never null).
///
/// The client's own ids are always [`RequestId::Number`]; a server may use
/// either form for its requests, and the engine echoes it back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    /// Integers print bare, strings print quoted (`7`, `"abc"`), so the two
    /// id spaces stay distinguishable in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        RequestId::String(s)
    }
}

/// A JSON-RPC error object: `{"code": .., "message": .., "data"?: ..}`.
///
/// Used both for errors received from the server (inside
/// [`RequestError::Remote`](super::RequestError::Remote)) and for errors the
/// application answers a server request with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see the `*_ERROR` / `METHOD_NOT_FOUND` constants).
    pub code: i64,
    /// A short description of the error.
    pub message: String,
    /// Additional information, kept as raw JSON (`null` reads as `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    /// An error object without `data`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32601 `Method not found`: the answer to a request nobody handles.
    pub fn method_not_found() -> Self {
        ErrorObject::new(METHOD_NOT_FOUND, "Method not found")
    }

    /// -32603 with `message`: the handler of a request failed (panicked,
    /// could not run, gave no answer).
    pub fn internal(message: impl Into<String>) -> Self {
        ErrorObject::new(INTERNAL_ERROR, message)
    }

    /// The same error object with `data` attached.
    pub fn with_data(mut self, data: Box<RawValue>) -> Self {
        self.data = Some(data);
        self
    }
}

/// The -32602 (invalid params) a handler answers for params that do not
/// parse, with the [`InvalidParams`](crate::mcp::types::InvalidParams)
/// message.
impl From<crate::mcp::types::InvalidParams> for ErrorObject {
    fn from(e: crate::mcp::types::InvalidParams) -> Self {
        ErrorObject::new(INVALID_PARAMS, e.to_string())
    }
}

impl PartialEq for ErrorObject {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_deref().map(RawValue::get) == other.data.as_deref().map(RawValue::get)
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MCP error {}: {}", self.code, self.message)
    }
}

/// One valid incoming JSON-RPC message, borrowing from the received text.
#[derive(Debug)]
pub enum Message<'a> {
    /// A request from the peer: it must be answered with the same `id`.
    Request {
        /// The peer's id, to be echoed in the response.
        id: RequestId,
        /// The method name.
        method: Cow<'a, str>,
        /// The params (an object or an array), if present.
        params: Option<&'a RawValue>,
    },
    /// A notification from the peer: no answer.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The params (an object or an array), if present.
        params: Option<&'a RawValue>,
    },
    /// A response to a request (ours, if the id matches).
    Response {
        /// The id it answers.
        id: RequestId,
        /// `result` (which may be `null`) or `error`.
        outcome: Result<&'a RawValue, ErrorObject>,
    },
}

/// Why a JSON text is not a valid JSON-RPC message.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    /// Valid JSON, but neither an object nor (accepted) batch array.
    NotAnObject,
    /// A top-level array while batches are not accepted.
    BatchNotAccepted,
    /// An empty batch (`[]`).
    EmptyBatch,
    /// The same member appears twice in the object.
    DuplicateMember,
    /// No `"jsonrpc"` member.
    MissingVersion,
    /// `"jsonrpc"` is not the string `"2.0"`.
    WrongVersion,
    /// `"method"` is present but not a string.
    MethodNotString,
    /// `"params"` is present but neither an object nor an array.
    ParamsNotStructured,
    /// A message with `"method"` also carries `"result"` or `"error"`.
    MethodWithResult,
    /// `"id"` is `null`.
    NullId,
    /// `"id"` is neither an integer (fitting i64) nor a string.
    BadId,
    /// A response (no `"method"`) without an `"id"`.
    MissingId,
    /// A response carries both `"result"` and `"error"`.
    ResultAndError,
    /// No `"method"`, no `"result"` and no `"error"`.
    NoResultOrError,
    /// `"error"` is not `{"code": integer, "message": string, ...}`.
    MalformedError,
    /// A server request reused the id of one of its requests still open.
    DuplicateRequestId,
}

impl InvalidReason {
    /// A short English description.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::NotAnObject => "message is not a JSON object",
            InvalidReason::BatchNotAccepted => {
                "batch (array) not accepted in this protocol version"
            }
            InvalidReason::EmptyBatch => "empty batch",
            InvalidReason::DuplicateMember => "duplicate member in message object",
            InvalidReason::MissingVersion => "missing \"jsonrpc\": \"2.0\"",
            InvalidReason::WrongVersion => "\"jsonrpc\" is not \"2.0\"",
            InvalidReason::MethodNotString => "\"method\" is not a string",
            InvalidReason::ParamsNotStructured => "\"params\" is neither an object nor an array",
            InvalidReason::MethodWithResult => {
                "message has both \"method\" and \"result\"/\"error\""
            }
            InvalidReason::NullId => "\"id\" is null",
            InvalidReason::BadId => "\"id\" is neither an integer nor a string",
            InvalidReason::MissingId => "response without \"id\"",
            InvalidReason::ResultAndError => "response has both \"result\" and \"error\"",
            InvalidReason::NoResultOrError => "message has no \"method\", \"result\" or \"error\"",
            InvalidReason::MalformedError => "\"error\" is not {code: integer, message: string}",
            InvalidReason::DuplicateRequestId => "server reused the id of an open request",
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON object that is not a valid JSON-RPC message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidMessage {
    /// What is wrong with it.
    pub reason: InvalidReason,
    /// Set when the object carries a `"method"` and a usable `"id"`: it was
    /// meant as a request, and the receiver should answer that id with
    /// [`INVALID_REQUEST`] so the peer does not wait forever.
    pub reply_to: Option<RequestId>,
}

impl InvalidMessage {
    fn new(reason: InvalidReason) -> Self {
        InvalidMessage {
            reason,
            reply_to: None,
        }
    }
}

/// Why a JSON text could not be read as a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not valid UTF-8 or not valid JSON (the parser's message).
    Malformed(String),
    /// Valid JSON, but not a valid JSON-RPC message.
    Invalid(InvalidMessage),
}

impl From<InvalidReason> for ParseError {
    fn from(reason: InvalidReason) -> Self {
        ParseError::Invalid(InvalidMessage::new(reason))
    }
}

/// The top level of one received JSON text.
#[derive(Debug)]
pub(crate) enum Frame<'a> {
    /// A single message object (the whole text, to be classified).
    Single(&'a str),
    /// A batch: each element is classified on its own.
    Batch(Vec<&'a RawValue>),
}

/// Splits one received JSON text into a single object or a batch.
#[cfg(test)]
pub(crate) fn frame(json: &[u8], accept_batches: bool) -> Result<Frame<'_>, ParseError> {
    frame_text(utf8(json)?, accept_batches)
}

/// The received bytes as text: UTF-8, or a malformed message.
pub(crate) fn utf8(json: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(json).map_err(|e| ParseError::Malformed(format!("invalid UTF-8: {e}")))
}

/// Splits a text already known to be UTF-8 into its message or its batch.
pub(crate) fn frame_text(text: &str, accept_batches: bool) -> Result<Frame<'_>, ParseError> {
    let first = text
        .bytes()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    match first {
        Some(b'{') => Ok(Frame::Single(text)),
        Some(b'[') => {
            let items: Vec<&RawValue> =
                serde_json::from_str(text).map_err(|e| ParseError::Malformed(e.to_string()))?;
            if !accept_batches {
                Err(InvalidReason::BatchNotAccepted.into())
            } else if items.is_empty() {
                Err(InvalidReason::EmptyBatch.into())
            } else {
                Ok(Frame::Batch(items))
            }
        }
        _ => Err(not_an_object(text)),
    }
}

/// The error for a text that does not start with `{`: malformed, or valid
/// JSON of another type.
fn not_an_object(text: &str) -> ParseError {
    match serde_json::from_str::<de::IgnoredAny>(text) {
        Ok(_) => InvalidReason::NotAnObject.into(),
        Err(e) => ParseError::Malformed(e.to_string()),
    }
}

/// The members of a message object, each kept raw. `Some` means "present",
/// including present-and-`null` (see [`present`]).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Deserializes a present member as `Some(raw)`, even when it is `null`
/// (`Option<&RawValue>` alone would turn `null` into `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// Reads a raw JSON value as a request id.
pub(crate) fn parse_id(raw: &RawValue) -> Result<RequestId, InvalidReason> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => text
            .parse::<i64>()
            .map(RequestId::Number)
            .map_err(|_| InvalidReason::BadId),
        Some(b'"') => serde_json::from_str::<String>(text)
            .map(RequestId::String)
            .map_err(|_| InvalidReason::BadId),
        Some(b'n') => Err(InvalidReason::NullId),
        _ => Err(InvalidReason::BadId),
    }
}

/// A text where a JavaScript peer wrote half a surrogate pair
/// (`JSON.stringify` of a sliced emoji gives `"\ud83d"`, which
/// `JSON.parse` accepts and serde_json refuses), with each lone half
/// replaced by `\ufffd` (U+FFFD, the replacement character); `None` when
/// there is none (the text is used as it is). Only escapes are looked at:
/// in valid JSON a backslash only stands inside strings. Cheap when there
/// is nothing to repair: one search for a backslash, and a look at each
/// escape.
pub fn repair_lone_surrogates(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex = |at: usize| -> Option<u16> {
        let digits = bytes.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    // `\uXXXX` at `at` (the backslash), if it is one.
    let escape = |at: usize| -> Option<u16> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    // (A backslash ending the text leaves `i` past its end: `get` stops
    // the loop there.)
    while let Some(found) = bytes.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + found;
        let Some(unit) = escape(at) else {
            // Any other escape: skip it (it may be `\\` before a `u`).
            i = at + 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match escape(at + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i = at + 12; // a whole pair
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let repaired = out.get_or_insert_with(|| String::with_capacity(text.len()));
            repaired.push_str(&text[copied..at]);
            repaired.push_str("\\ufffd");
            copied = at + 6;
        }
        i = at + 6;
    }
    let mut repaired = out?;
    repaired.push_str(&text[copied..]);
    Some(repaired)
}

/// Reads a raw JSON value as a string, borrowing when it has no escapes.
pub(crate) fn parse_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    if !text.starts_with('"') {
        return None;
    }
    match serde_json::from_str::<&str>(text) {
        Ok(s) => Some(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(text).ok().map(Cow::Owned),
    }
}

fn is_structured(raw: &RawValue) -> bool {
    matches!(raw.get().as_bytes().first(), Some(b'{' | b'['))
}

/// Classifies one JSON object text as a JSON-RPC message.
///
/// `text` must hold exactly one JSON value (surrounding whitespace allowed).
/// Anything else is a [`ParseError`]: malformed JSON, a non-object, or an
/// object that breaks a JSON-RPC rule (with the reason).
pub fn parse_message(text: &str) -> Result<Message<'_>, ParseError> {
    // The common response first, without serde's envelope (the same
    // message; anything else goes the general way).
    match super::response::read_response(text, |_| None) {
        Some(message) => Ok(message),
        None => parse_message_slow(text),
    }
}

/// [`parse_message`]'s general path: every shape, every error (public for
/// the fuzz target that compares it with the fast path).
#[doc(hidden)]
pub fn parse_message_slow(text: &str) -> Result<Message<'_>, ParseError> {
    if !text.trim_start().starts_with('{') {
        // (A derived struct would also accept an array, positionally.)
        return Err(not_an_object(text));
    }
    let env: Envelope<'_> = match serde_json::from_str(text) {
        Ok(env) => env,
        // Every member accepts any value, so a data error on an object
        // that is syntactically valid can only be a duplicate member.
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            return Err(InvalidReason::DuplicateMember.into())
        }
        Err(e) => return Err(ParseError::Malformed(e.to_string())),
    };
    classify(&env)
}

fn classify<'a>(env: &Envelope<'a>) -> Result<Message<'a>, ParseError> {
    let id = env.id.map(parse_id);
    // A message with a method and a usable id was meant as a request: tell
    // the caller whom to answer with "Invalid Request".
    let reply_to = match (&env.method, &id) {
        (Some(_), Some(Ok(id))) => Some(id.clone()),
        _ => None,
    };
    let invalid = |reason: InvalidReason| {
        Err(ParseError::Invalid(InvalidMessage {
            reason,
            reply_to: reply_to.clone(),
        }))
    };

    match env.jsonrpc {
        None => return invalid(InvalidReason::MissingVersion),
        Some(v) if v.get() == "\"2.0\"" => {}
        Some(v) => {
            if parse_str(v).as_deref() != Some("2.0") {
                return invalid(InvalidReason::WrongVersion);
            }
        }
    }

    if let Some(method) = env.method {
        let Some(method) = parse_str(method) else {
            return invalid(InvalidReason::MethodNotString);
        };
        if env.result.is_some() || env.error.is_some() {
            return invalid(InvalidReason::MethodWithResult);
        }
        if env.params.is_some_and(|p| !is_structured(p)) {
            return invalid(InvalidReason::ParamsNotStructured);
        }
        let params = env.params;
        return match id {
            None => Ok(Message::Notification { method, params }),
            Some(Ok(id)) => Ok(Message::Request { id, method, params }),
            Some(Err(reason)) => invalid(reason),
        };
    }

    let id = match id {
        None => return invalid(InvalidReason::MissingId),
        Some(Err(reason)) => return invalid(reason),
        Some(Ok(id)) => id,
    };
    let outcome = match (env.result, env.error) {
        (Some(_), Some(_)) => return invalid(InvalidReason::ResultAndError),
        (None, None) => return invalid(InvalidReason::NoResultOrError),
        (Some(result), None) => Ok(result),
        (None, Some(error)) => match serde_json::from_str::<ErrorObject>(error.get()) {
            Ok(error) => Err(error),
            Err(_) => return invalid(InvalidReason::MalformedError),
        },
    };
    Ok(Message::Response { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let repair = |s: &str| repair_lone_surrogates(s);
        // What JSON.stringify writes for "x" + "😀".slice(0, 1).
        assert_eq!(
            repair(r#"{"t":"x\ud83d"}"#).as_deref(),
            Some(r#"{"t":"x\ufffd"}"#)
        );
        assert_eq!(
            repair(r#"{"t":"\ude00y"}"#).as_deref(),
            Some(r#"{"t":"\ufffdy"}"#)
        );
        // Two lone halves, reversed: both replaced.
        assert_eq!(
            repair(r#"["\ude00\ud83d"]"#).as_deref(),
            Some(r#"["\ufffd\ufffd"]"#)
        );
        // Whole pairs, other escapes and an escaped backslash before `u` stay.
        for fine in [
            r#"{"t":"\ud83d\ude00"}"#,
            r#"{"t":"\u00e9\n\"\\ud83d"}"#,
            r#"{"t":"plain"}"#,
            r#"{"t":"\u12"}"#,
            // Not JSON, still no panic: a backslash last, after an escape,
            // or alone (peer bytes never panic).
            "\\",
            "x\\",
            r#"\u0041\"#,
        ] {
            assert_eq!(repair(fine), None, "{fine}");
        }
        assert_eq!(repair(r#"\ud83d"#).as_deref(), Some(r#"\ufffd"#));
        assert_eq!(repair(r#"\ud83d\"#).as_deref(), Some(r#"\ufffd\"#));
        assert_eq!(repair(r#"\ud83d\ude0"#).as_deref(), Some(r#"\ufffd\ude0"#));
        // The repaired text parses, with U+FFFD in place.
        let v: serde_json::Value =
            serde_json::from_str(&repair(r#"{"t":"a\ud83db"}"#).unwrap()).unwrap();
        assert_eq!(v["t"], "a\u{fffd}b");
    }

    fn reason(text: &str) -> InvalidReason {
        match parse_message(text) {
            Err(ParseError::Invalid(inv)) => inv.reason,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn classifies_the_three_kinds() {
        match parse_message(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap() {
            Message::Request { id, method, params } => {
                assert_eq!(id, RequestId::String("a".into()));
                assert_eq!(method, "ping");
                assert!(params.is_none());
            }
            other => panic!("{other:?}"),
        }
        match parse_message(r#"{"jsonrpc":"2.0","method":"x","params":[1]}"#).unwrap() {
            Message::Notification { method, params } => {
                assert_eq!(method, "x");
                assert_eq!(params.unwrap().get(), "[1]");
            }
            other => panic!("{other:?}"),
        }
        match parse_message(r#" {"id":7,"result":null,"jsonrpc":"2.0"} "#).unwrap() {
            Message::Response { id, outcome } => {
                assert_eq!(id, RequestId::Number(7));
                assert_eq!(outcome.unwrap().get(), "null");
            }
            other => panic!("{other:?}"),
        }
        match parse_message(
            r#"{"jsonrpc":"2.0","id":-1,"error":{"code":-32000,"message":"m","data":{"k":1}}}"#,
        )
        .unwrap()
        {
            Message::Response { id, outcome } => {
                assert_eq!(id, RequestId::Number(-1));
                let e = outcome.unwrap_err();
                assert_eq!((e.code, e.message.as_str()), (-32000, "m"));
                assert_eq!(e.data.unwrap().get(), r#"{"k":1}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn escaped_method_and_version_are_decoded() {
        match parse_message(r#"{"jsonrpc":"2\u002e0","method":"a\/b"}"#).unwrap() {
            Message::Notification { method, .. } => assert_eq!(method, "a/b"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_reasons() {
        assert_eq!(
            reason(r#"{"id":1,"result":1}"#),
            InvalidReason::MissingVersion
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"1.0","id":1,"result":1}"#),
            InvalidReason::WrongVersion
        );
        assert_eq!(
            reason(r#"{"jsonrpc":2.0,"id":1,"result":1}"#),
            InvalidReason::WrongVersion
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}"#),
            InvalidReason::ResultAndError
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":null,"result":1}"#),
            InvalidReason::NullId
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1.5,"result":1}"#),
            InvalidReason::BadId
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":true,"result":1}"#),
            InvalidReason::BadId
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":99999999999999999999,"result":1}"#),
            InvalidReason::BadId
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","method":5}"#),
            InvalidReason::MethodNotString
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","method":"m","params":3}"#),
            InvalidReason::ParamsNotStructured
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","method":"m","params":null}"#),
            InvalidReason::ParamsNotStructured
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","method":"m","result":{}}"#),
            InvalidReason::MethodWithResult
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","result":{}}"#),
            InvalidReason::MissingId
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1}"#),
            InvalidReason::NoResultOrError
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":""}}"#),
            InvalidReason::MalformedError
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1,"error":null}"#),
            InvalidReason::MalformedError
        );
        assert_eq!(
            reason(r#"{"jsonrpc":"2.0","id":1,"id":2,"result":1}"#),
            InvalidReason::DuplicateMember
        );
        assert_eq!(reason("3"), InvalidReason::NotAnObject);
    }

    #[test]
    fn invalid_request_with_id_asks_for_a_reply() {
        match parse_message(r#"{"jsonrpc":"2.0","id":"r","method":"m","params":1}"#) {
            Err(ParseError::Invalid(inv)) => {
                assert_eq!(inv.reason, InvalidReason::ParamsNotStructured);
                assert_eq!(inv.reply_to, Some(RequestId::String("r".into())));
            }
            other => panic!("{other:?}"),
        }
        match parse_message(r#"{"id":4,"method":"m"}"#) {
            Err(ParseError::Invalid(inv)) => assert_eq!(inv.reply_to, Some(RequestId::Number(4))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_texts() {
        for text in ["{", "{\"a\":}", "{} x", "nul", ""] {
            assert!(
                matches!(parse_message(text), Err(ParseError::Malformed(_))),
                "{text}"
            );
        }
        assert!(matches!(
            frame(b"\xff{}", false),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(frame(b"[1,", true), Err(ParseError::Malformed(_))));
        assert!(matches!(frame(b"tru", true), Err(ParseError::Malformed(_))));
        assert_eq!(
            frame(b" \"s\"", true).unwrap_err(),
            InvalidReason::NotAnObject.into()
        );
        assert_eq!(
            frame(b"[]", true).unwrap_err(),
            InvalidReason::EmptyBatch.into()
        );
        assert_eq!(
            frame(b"[{}]", false).unwrap_err(),
            InvalidReason::BatchNotAccepted.into()
        );
        assert!(matches!(frame(b"[{},1]", true), Ok(Frame::Batch(v)) if v.len() == 2));
    }

    #[test]
    fn request_id_serde_and_display() {
        assert_eq!(serde_json::to_string(&RequestId::Number(3)).unwrap(), "3");
        assert_eq!(
            serde_json::to_string(&RequestId::from("x")).unwrap(),
            "\"x\""
        );
        assert_eq!(
            serde_json::from_str::<RequestId>("\"x\"").unwrap(),
            RequestId::from("x")
        );
        assert_eq!(RequestId::Number(3).to_string(), "3");
        assert_eq!(RequestId::from("x").to_string(), "\"x\"");
    }
}
