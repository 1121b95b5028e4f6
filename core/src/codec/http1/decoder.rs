//! Response decoding: bytes in, [`ResponseEvent`]s out, one response at a
//! time, bodies streamed as borrowed slices of the input.

use memchr::memchr;

use super::head::{self, Asked, Framing, ResponseHead};
use super::{Http1Error, Http1Limits};
use crate::codec::preview;

/// What [`ResponseDecoder::feed`] reports, in this order for each response:
/// one `Head`, any number of `Body`, one `End`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseEvent<'a> {
    /// The final response head (1xx interim heads are skipped). The driver
    /// hands it to the transport (`Input::HttpHead`).
    Head(ResponseHead),
    /// Body bytes, never empty, borrowed from the input (chunked framing
    /// removed). Delivered as they arrive, even mid-chunk: the driver
    /// forwards them at once (`Input::HttpBody`).
    Body(&'a [u8]),
    /// The response is complete. If `keep_alive`, the connection may carry
    /// the next request (after [`ResponseDecoder::reset`]); otherwise the
    /// driver closes it.
    End {
        /// Whether the connection can be reused.
        keep_alive: bool,
    },
}

/// An incremental HTTP/1.x response decoder for one connection.
///
/// Decodes one response; [`reset`](Self::reset) readies it for the next
/// one on a kept-alive connection. Feed it whatever the socket gives; on
/// EOF call [`finish_eof`](Self::finish_eof). Whatever the chunking of the
/// input, the events (concatenated body bytes), the byte counts and the
/// errors are the same.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    limits: Http1Limits,
    asked: Asked,
    state: State,
    /// Head bytes so far (in `Head`), or the current chunk-size or trailer
    /// line (in `Chunked`). Bounded by the limits.
    buf: Vec<u8>,
    /// Empty-line bytes skipped before the status line (count toward
    /// `max_head_size`).
    skipped: usize,
    /// Where to resume looking for the end of the head in `buf`.
    scan_from: usize,
    /// Whether any response byte (other than empty lines) has arrived.
    received: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Head,
    Length { remaining: u64, keep_alive: bool },
    Chunked { phase: Chunk, keep_alive: bool },
    Close,
    Done,
    Failed(Http1Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line into `buf`.
    Size,
    /// This many bytes of chunk data left.
    Data(u64),
    /// Expecting the CR (or bare LF) after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// Reading trailer lines (into `buf`); `used` bytes of them done.
    Trailers { used: usize },
}

impl ResponseDecoder {
    /// A decoder for the response to a request with `method`: a response
    /// to `HEAD` has no body whatever its headers say, nor has a 2xx to
    /// `CONNECT` (the bytes after its head are the tunnel's: `feed` stops
    /// there, and the end is reported without keep-alive).
    pub fn new(method: &str, limits: Http1Limits) -> Self {
        Self {
            limits,
            asked: Asked::of(method),
            state: State::Head,
            buf: Vec::new(),
            skipped: 0,
            scan_from: 0,
            received: false,
        }
    }

    /// Readies the decoder for the next response on the same connection,
    /// to a request with `method`, whatever its state (also after an error).
    /// Feed it the bytes a previous `feed` left unconsumed first.
    pub fn reset(&mut self, method: &str) {
        self.asked = Asked::of(method);
        self.state = State::Head;
        self.buf.clear();
        self.buf.shrink_to(4096);
        self.skipped = 0;
        self.scan_from = 0;
        self.received = false;
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> &Http1Limits {
        &self.limits
    }

    /// True once [`ResponseEvent::End`] has been emitted.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The error that stopped this decoder, if any (until [`Self::reset`]).
    pub fn error(&self) -> Option<&Http1Error> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Decodes `input`, calling `on` for each event, and returns how many
    /// bytes of `input` belong to this response. That is all of them, except
    /// when the response ends inside `input`: the rest belongs to the next
    /// response (reset, then feed it again). Once done, `feed` consumes
    /// nothing and emits nothing.
    ///
    /// An error (the peer broke HTTP/1.1 or a limit) is sticky: every later
    /// call returns it until [`Self::reset`]. Events emitted before it in the
    /// same call (say, body bytes) were valid.
    pub fn feed<'a>(
        &mut self,
        input: &'a [u8],
        mut on: impl FnMut(ResponseEvent<'a>),
    ) -> Result<usize, Http1Error> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        let result = self.run(input, &mut on);
        if let Err(e) = &result {
            self.fail(e.clone());
        }
        result
    }

    /// The peer closed the connection (read returned 0). Ends a body
    /// delimited by the close (emitting `End { keep_alive: false }`); is a
    /// no-op once done; anywhere else the response is cut short:
    /// [`Http1Error::NoResponse`] if nothing arrived, else
    /// [`Http1Error::UnexpectedEof`].
    pub fn finish_eof(
        &mut self,
        mut on: impl FnMut(ResponseEvent<'static>),
    ) -> Result<(), Http1Error> {
        let state = match &self.state {
            State::Failed(e) => return Err(e.clone()),
            State::Done => return Ok(()),
            State::Close => {
                self.end(false, &mut on);
                return Ok(());
            }
            State::Head if !self.received => {
                self.fail(Http1Error::NoResponse);
                return Err(Http1Error::NoResponse);
            }
            State::Head => "response head",
            State::Length { .. } => "body (Content-Length)",
            State::Chunked { phase, .. } => match phase {
                Chunk::Size => "chunk size line",
                Chunk::Data(_) | Chunk::DataCr | Chunk::DataLf => "chunk data",
                Chunk::Trailers { .. } => "trailer section",
            },
        };
        let e = Http1Error::UnexpectedEof { state };
        self.fail(e.clone());
        Err(e)
    }

    fn fail(&mut self, e: Http1Error) {
        self.state = State::Failed(e);
        self.buf.clear();
    }

    fn end<'a>(&mut self, keep_alive: bool, on: &mut dyn FnMut(ResponseEvent<'a>)) {
        self.state = State::Done;
        on(ResponseEvent::End { keep_alive });
    }

    fn run<'a>(
        &mut self,
        input: &'a [u8],
        on: &mut dyn FnMut(ResponseEvent<'a>),
    ) -> Result<usize, Http1Error> {
        let mut pos = 0;
        while pos < input.len() {
            let rest = &input[pos..];
            pos += match self.state {
                State::Head => self.read_head(rest, on)?,
                State::Length {
                    remaining,
                    keep_alive,
                } => {
                    let n = clamp(remaining, rest.len());
                    on(ResponseEvent::Body(&rest[..n]));
                    let remaining = remaining - n as u64;
                    if remaining == 0 {
                        self.end(keep_alive, on);
                    } else {
                        self.state = State::Length {
                            remaining,
                            keep_alive,
                        };
                    }
                    n
                }
                State::Chunked { phase, keep_alive } => {
                    self.read_chunked(rest, phase, keep_alive, on)?
                }
                State::Close => {
                    on(ResponseEvent::Body(rest));
                    rest.len()
                }
                State::Done | State::Failed(_) => break,
            };
        }
        Ok(pos)
    }

    /// Buffers head bytes until the head is complete, then parses it.
    fn read_head<'a>(
        &mut self,
        input: &'a [u8],
        on: &mut dyn FnMut(ResponseEvent<'a>),
    ) -> Result<usize, Http1Error> {
        let limit = self.limits.max_head_size;
        let mut pos = 0;
        if self.buf.is_empty() {
            // Empty lines before the status line are tolerated (a sloppy
            // server's extra CRLF after a chunked body), but counted.
            pos = input
                .iter()
                .position(|&b| b != b'\r' && b != b'\n')
                .unwrap_or(input.len());
            self.skipped = self.skipped.saturating_add(pos);
            if self.skipped >= limit {
                return Err(Http1Error::HeadTooLarge { limit });
            }
            if pos == input.len() {
                return Ok(pos);
            }
            self.received = true;
        }
        let old = self.buf.len();
        let room = limit.saturating_sub(self.skipped + old);
        let window = &input[pos..input.len().min(pos + room)];
        // Only head bytes are ever copied: look for the end first. An end
        // whose first LF is already buffered needs at most 2 more bytes.
        let end = if old == 0 {
            find_head_end(window, 0)
        } else {
            self.buf.extend_from_slice(&window[..window.len().min(2)]);
            let across = find_head_end(&self.buf, self.scan_from);
            self.buf.truncate(old);
            debug_assert!(across.is_none_or(|end| end > old), "end in old bytes");
            across
                .and_then(|end| end.checked_sub(old))
                .or_else(|| find_head_end(window, 0))
        };
        let Some(end) = end else {
            self.buf.extend_from_slice(window);
            if self.skipped + self.buf.len() >= limit {
                return Err(Http1Error::HeadTooLarge { limit });
            }
            // The end marker is at most 3 bytes: rescan the last ones.
            self.scan_from = self.buf.len().saturating_sub(3);
            return Ok(pos + window.len());
        };
        let used = pos + end;
        let parsed = if old == 0 {
            // The whole head is in this input: parse it in place.
            head::parse(&window[..end], &self.limits)
        } else {
            self.buf.extend_from_slice(&window[..end]);
            head::parse(&self.buf, &self.limits)
        };
        self.buf.clear();
        self.skipped = 0;
        self.scan_from = 0;
        let head = parsed?;
        match head.status {
            101 => Err(Http1Error::UnexpectedUpgrade),
            // Interim (100 Continue, 102, 103 Early Hints): the final head
            // follows.
            100..=199 => Ok(used),
            _ => {
                let (framing, keep_alive) = head::framing(&head, self.asked)?;
                on(ResponseEvent::Head(head));
                match framing {
                    Framing::None | Framing::Length(0) => self.end(keep_alive, on),
                    Framing::Length(remaining) => {
                        self.state = State::Length {
                            remaining,
                            keep_alive,
                        }
                    }
                    Framing::Chunked => {
                        self.state = State::Chunked {
                            phase: Chunk::Size,
                            keep_alive,
                        }
                    }
                    Framing::Close => self.state = State::Close,
                }
                Ok(used)
            }
        }
    }

    /// One step of the chunked body: consumes at least one byte of `input`.
    fn read_chunked<'a>(
        &mut self,
        input: &'a [u8],
        phase: Chunk,
        keep_alive: bool,
        on: &mut dyn FnMut(ResponseEvent<'a>),
    ) -> Result<usize, Http1Error> {
        let (used, phase) = match phase {
            Chunk::Size => {
                let limit = self.limits.max_chunk_line;
                let (used, complete) = take_line(&mut self.buf, input, limit)
                    .ok_or(Http1Error::ChunkLineTooLong { limit })?;
                if !complete {
                    (used, Chunk::Size)
                } else {
                    let size = parse_chunk_size(&self.buf)?;
                    self.buf.clear();
                    match size {
                        0 => (used, Chunk::Trailers { used: 0 }),
                        n => (used, Chunk::Data(n)),
                    }
                }
            }
            Chunk::Data(remaining) => {
                let n = clamp(remaining, input.len());
                on(ResponseEvent::Body(&input[..n]));
                match remaining - n as u64 {
                    0 => (n, Chunk::DataCr),
                    left => (n, Chunk::Data(left)),
                }
            }
            Chunk::DataCr => match input[0] {
                b'\r' => (1, Chunk::DataLf),
                b'\n' => (1, Chunk::Size),
                _ => return Err(Http1Error::MissingChunkTerminator),
            },
            Chunk::DataLf => match input[0] {
                b'\n' => (1, Chunk::Size),
                _ => return Err(Http1Error::MissingChunkTerminator),
            },
            Chunk::Trailers { used: done } => {
                let limit = self.limits.max_trailer_size;
                let (used, complete) = take_line(&mut self.buf, input, limit.saturating_sub(done))
                    .ok_or(Http1Error::TrailersTooLarge { limit })?;
                if !complete {
                    (used, Chunk::Trailers { used: done })
                } else if matches!(self.buf.as_slice(), b"\n" | b"\r\n") {
                    self.buf.clear();
                    self.end(keep_alive, on);
                    return Ok(used);
                } else {
                    // Trailer fields are ignored.
                    let done = done + self.buf.len();
                    self.buf.clear();
                    (used, Chunk::Trailers { used: done })
                }
            }
        };
        self.state = State::Chunked { phase, keep_alive };
        Ok(used)
    }
}

/// `min(remaining, available)` as a usize.
fn clamp(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

/// Position just past the first empty line (LF, optional CR, LF) whose
/// first LF is at or after `from`.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(off) = memchr(b'\n', buf.get(i..)?) {
        let lf = i + off;
        match buf.get(lf + 1..) {
            Some([b'\n', ..]) => return Some(lf + 2),
            Some([b'\r', b'\n', ..]) => return Some(lf + 3),
            _ => i = lf + 1,
        }
    }
    None
}

/// Appends to `line` the bytes of `input` up to and including the first LF,
/// if the whole line (with its LF) stays within `limit` bytes. Returns how
/// many bytes were taken and whether the line is complete, or `None` if
/// the line is (or must become) longer than `limit`.
fn take_line(line: &mut Vec<u8>, input: &[u8], limit: usize) -> Option<(usize, bool)> {
    let window = limit.saturating_sub(line.len());
    match memchr(b'\n', &input[..input.len().min(window)]) {
        Some(i) => {
            line.extend_from_slice(&input[..=i]);
            Some((i + 1, true))
        }
        None if input.len() >= window => None,
        None => {
            line.extend_from_slice(input);
            Some((input.len(), false))
        }
    }
}

/// Parses `HEX [BWS ; extensions] [CR] LF`; extensions are ignored (but
/// must not hold control bytes other than HTAB).
fn parse_chunk_size(line: &[u8]) -> Result<u64, Http1Error> {
    let invalid = || Http1Error::InvalidChunkSize(preview(line, 40));
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let digits = body
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(body.len());
    if digits == 0 {
        return Err(invalid());
    }
    let mut size: u64 = 0;
    for &b in &body[..digits] {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or_else(invalid)?;
    }
    let mut rest = &body[digits..];
    while let [b' ' | b'\t', tail @ ..] = rest {
        rest = tail;
    }
    match rest {
        [] => Ok(size),
        [b';', ext @ ..] if ext.iter().all(|&b| b == b'\t' || b >= 0x20 && b != 0x7f) => Ok(size),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end() {
        assert_eq!(find_head_end(b"a\r\n\r\nb", 0), Some(5));
        assert_eq!(find_head_end(b"a\n\nb", 0), Some(3));
        assert_eq!(find_head_end(b"a\r\n\nb", 0), Some(4));
        assert_eq!(find_head_end(b"a\n\r\nb", 0), Some(4));
        assert_eq!(find_head_end(b"a\r\nb\r\n\r", 0), None);
        assert_eq!(find_head_end(b"a\r\nb\r\n\r\n", 4), Some(8));
        assert_eq!(find_head_end(b"a\n\n", 10), None);
        assert_eq!(find_head_end(b"", 0), None);
        assert_eq!(find_head_end(b"a\r\n\r\r\n", 0), None);
    }

    #[test]
    fn lines() {
        let mut line = Vec::new();
        assert_eq!(take_line(&mut line, b"ab", 4), Some((2, false)));
        assert_eq!(take_line(&mut line, b"c\nd", 4), Some((2, true)));
        assert_eq!(line, b"abc\n");
        line.clear();
        assert_eq!(take_line(&mut line, b"abcd", 4), None);
        assert_eq!(take_line(&mut line, b"abc", 4), Some((3, false)));
        assert_eq!(take_line(&mut line, b"d", 4), None);
        assert_eq!(take_line(&mut Vec::new(), b"\n", 0), None);
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"0\r\n"), Ok(0));
        assert_eq!(parse_chunk_size(b"1aF\n"), Ok(0x1af));
        assert_eq!(parse_chunk_size(b"10 ;name=value;x=\"q\"\r\n"), Ok(16));
        assert_eq!(parse_chunk_size(b"000000000000000000000001\r\n"), Ok(1));
        assert_eq!(parse_chunk_size(b"ffffffffffffffff\r\n"), Ok(u64::MAX));
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"-1\r\n",
            b"1 2\r\n",
            b"10000000000000000\r\n",
            b"1;a\rb\r\n",
            b"1;\0\r\n",
            b" 1\r\n",
        ] {
            assert!(
                matches!(parse_chunk_size(bad), Err(Http1Error::InvalidChunkSize(_))),
                "{bad:?}"
            );
        }
    }
}
