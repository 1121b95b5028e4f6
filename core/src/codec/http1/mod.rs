//! HTTP/1.1 client codec: request heads out, responses in.
//!
//! Sans-IO like the other codecs: [`Request::encode`] writes bytes into a
//! caller's buffer, [`ResponseDecoder::feed`] turns bytes read from the
//! socket into [`ResponseEvent`]s. The tokio and smol adapters drive it over
//! TCP or TLS for the Streamable HTTP and legacy HTTP+SSE transports.
//!
//! ```text
//!             feed(bytes)                         finish_eof()
//!   ┌──────┐  head complete  ┌─────────────────┐  ─────────────►  End
//!   │ Head │ ──────────────► │ body: length    │  remaining == 0 ► End
//!   └──────┘  (1xx skipped)  │       chunked   │  last chunk     ► End
//!      ▲                     │       to close  │  (EOF only)
//!      │ reset(method)       └─────────────────┘
//!      └──────────── Done (leftover bytes are not consumed) ◄──┘
//! ```
//!
//! - Heads are parsed with `httparse`, bounded by [`Http1Limits`]; head bytes
//!   split across reads are buffered (at most `max_head_size`), bodies never
//!   are: [`ResponseEvent::Body`] borrows from the caller's input, so a
//!   long-lived `text/event-stream` body streams out as it arrives.
//! - Body framing follows RFC 9112 §6.3 for responses; keep-alive follows
//!   §9.3 and is reported in [`ResponseEvent::End`].
//! - Errors are typed ([`Http1Error`]). A decode error poisons the decoder
//!   (the connection's framing is lost: close it); [`ResponseDecoder::reset`]
//!   makes it usable again. Encode errors are local misuse and write nothing.
//!
//! ```
//! use mcpwire::codec::http1::{Http1Limits, Request, ResponseDecoder, ResponseEvent};
//!
//! let mut out = Vec::new();
//! Request::new("POST", "/mcp", "example.com")
//!     .with_header("Content-Type", "application/json")
//!     .with_body(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec())
//!     .encode(&mut out)
//!     .unwrap();
//!
//! let mut dec = ResponseDecoder::new("POST", Http1Limits::default());
//! let input = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
//! let mut body = Vec::new();
//! let used = dec
//!     .feed(input, |ev| match ev {
//!         ResponseEvent::Head(head) => assert_eq!(head.status, 200),
//!         ResponseEvent::Body(bytes) => body.extend_from_slice(bytes),
//!         ResponseEvent::End { keep_alive } => assert!(keep_alive),
//!     })
//!     .unwrap();
//! assert_eq!((used, &body[..]), (input.len(), &b"{}"[..]));
//! assert!(dec.is_done());
//! ```

mod decoder;
mod head;
mod request;

pub use decoder::{ResponseDecoder, ResponseEvent};
pub use head::ResponseHead;
pub use request::Request;

/// Bounds on what a [`ResponseDecoder`] buffers. Exceeding one is a typed
/// [`Http1Error`]. Bodies are never buffered, so they have no limit here
/// (bound them where they are consumed, e.g. in the SSE decoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http1Limits {
    /// Largest response head (status line, header lines, blank line and any
    /// empty lines before the status line), in bytes. Default 64 KiB.
    pub max_head_size: usize,
    /// Most header lines in one head. Default 100.
    pub max_headers: usize,
    /// Longest chunk-size line (hex size, extensions and line ending), in
    /// bytes. Default 4 KiB.
    pub max_chunk_line: usize,
    /// Largest trailer section after the last chunk (trailer lines and the
    /// final empty line), in bytes. Default 16 KiB.
    pub max_trailer_size: usize,
}

impl Default for Http1Limits {
    fn default() -> Self {
        Self {
            max_head_size: 64 * 1024,
            max_headers: 100,
            max_chunk_line: 4 * 1024,
            max_trailer_size: 16 * 1024,
        }
    }
}

/// Everything that can go wrong encoding a request or decoding a response.
///
/// The first group is local misuse (see [`Http1Error::is_local`]): the
/// request was rejected and nothing was written. The rest is the peer's
/// misbehaviour (or a lost connection): the response can't be framed, so
/// the connection must be closed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Http1Error {
    /// The request method is not an RFC 9110 token.
    #[error("invalid request method {0:?}")]
    InvalidMethod(String),
    /// The request target is not origin-form (`/path?query`), `*`,
    /// absolute-form or (for `CONNECT`) authority-form, or holds
    /// whitespace, control or non-ASCII bytes.
    #[error("invalid request target {0:?}")]
    InvalidTarget(String),
    /// The `Host` value is empty or holds whitespace, control or non-ASCII
    /// bytes.
    #[error("invalid Host {0:?}")]
    InvalidHost(String),
    /// A request header name is not an RFC 9110 token.
    #[error("invalid header name {0:?}")]
    InvalidHeaderName(String),
    /// A request header value holds CR, LF, NUL or another control byte
    /// (only HTAB is allowed): header injection.
    #[error("invalid value for header {name:?}")]
    InvalidHeaderValue {
        /// The header's name.
        name: String,
    },
    /// The caller set a header the codec writes itself: `Host`,
    /// `Content-Length` or `Transfer-Encoding`.
    #[error("header {0:?} is set by the codec, not the caller")]
    ReservedHeader(String),

    /// The response head is larger than [`Http1Limits::max_head_size`].
    #[error("response head larger than {limit} bytes")]
    HeadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The response head has more than [`Http1Limits::max_headers`] headers.
    #[error("response head has more than {limit} headers")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// The response head is malformed.
    #[error("invalid response head: {0}")]
    InvalidHead(String),
    /// The server answered `101 Switching Protocols`; we never ask to upgrade.
    #[error("unexpected 101 Switching Protocols")]
    UnexpectedUpgrade,
    /// `Transfer-Encoding` is anything but a single, final `chunked`.
    #[error("unsupported Transfer-Encoding {0:?}")]
    UnsupportedTransferEncoding(String),
    /// A `Content-Length` value is not a decimal number that fits in a u64.
    #[error("invalid Content-Length {0:?}")]
    InvalidContentLength(String),
    /// `Content-Length` given several times with different values.
    #[error("conflicting Content-Length values")]
    ConflictingContentLength,
    /// A chunk-size line is not `HEX [; extensions]`, or the size overflows.
    #[error("invalid chunk size line {0:?}")]
    InvalidChunkSize(String),
    /// A chunk-size line is longer than [`Http1Limits::max_chunk_line`].
    #[error("chunk size line longer than {limit} bytes")]
    ChunkLineTooLong {
        /// The limit.
        limit: usize,
    },
    /// Chunk data is not followed by CRLF (or LF).
    #[error("chunk data not followed by CRLF")]
    MissingChunkTerminator,
    /// The trailer section is larger than [`Http1Limits::max_trailer_size`].
    #[error("trailer section larger than {limit} bytes")]
    TrailersTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The connection closed before a single byte of the response arrived
    /// (e.g. a stale keep-alive connection: an idempotent request may be
    /// retried on a new one, RFC 9112 §9.3.1).
    #[error("connection closed before any response")]
    NoResponse,
    /// The connection closed in the middle of a response.
    #[error("connection closed in the middle of the {state}")]
    UnexpectedEof {
        /// Which part of the response was being read.
        state: &'static str,
    },
}

impl Http1Error {
    /// True for the encode errors: our own misuse, not the peer's.
    pub fn is_local(&self) -> bool {
        matches!(
            self,
            Self::InvalidMethod(_)
                | Self::InvalidTarget(_)
                | Self::InvalidHost(_)
                | Self::InvalidHeaderName(_)
                | Self::InvalidHeaderValue { .. }
                | Self::ReservedHeader(_)
        )
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// [`is_tchar`] for each byte (a table: every header name of every
/// request is checked byte by byte).
const TCHAR: [bool; 256] = super::byte_table!(|c| c.is_ascii_alphanumeric()
    || matches!(
        c,
        b'!' | b'#'
            | b'$'
            | b'%'
            | b'&'
            | b'\''
            | b'*'
            | b'+'
            | b'-'
            | b'.'
            | b'^'
            | b'_'
            | b'`'
            | b'|'
            | b'~'
    ));

/// RFC 9110 `token`: one or more `tchar`.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Splits a comma-separated header list into trimmed, non-empty elements.
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Trims optional whitespace (SP, HTAB) from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table says what RFC 9110's `tchar` says, for every byte.
    #[test]
    fn the_tchar_table_is_the_definition() {
        for b in 0..=255u8 {
            let want = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), want, "{b:#04x}");
        }
    }

    #[test]
    fn tokens() {
        assert!(is_token(b"POST"));
        assert!(is_token(b"X-Custom_1.~!"));
        assert!(!is_token(b""));
        assert!(!is_token(b"a b"));
        assert!(!is_token(b"a:b"));
        assert!(!is_token(b"a\r\n"));
        assert!(!is_token("é".as_bytes()));
    }

    #[test]
    fn lists_and_ows() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"  "), b"");
        let v: Vec<&[u8]> = list_elements(b" close , ,Keep-Alive,").collect();
        assert_eq!(v, [&b"close"[..], &b"Keep-Alive"[..]]);
    }

    #[test]
    fn local_errors() {
        assert!(Http1Error::InvalidMethod("a b".into()).is_local());
        assert!(!Http1Error::NoResponse.is_local());
        assert!(!Http1Error::HeadTooLarge { limit: 1 }.is_local());
    }
}
