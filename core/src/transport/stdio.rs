//! The stdio transport: a child process speaking JSONL on stdin/stdout.
//!
//! ```text
//!   messages ──► Write(json + "\n") ──► child stdin
//!   child stdout ──► JsonlDecoder ──► engine.handle_message(line)
//!   child stderr ──► bounded tail + one Log per line
//!
//!   close():  CloseStdin ─(stdin_grace)─► Signal(Terminate) ─(term_grace)─► Signal(Kill)
//!             any step ends as soon as the driver reports Exited
//!   crash:    stdout EOF / Exited while running ─► every pending request fails with
//!             "server exited with status N: <stderr tail>"
//!   exit:     Exited is held until stdout and stderr reached EOF, or exit_grace
//!             passed (a grandchild may keep a pipe open), so that the error
//!             quotes the server's last words on stderr
//! ```
//!
//! The spec's shutdown order (close stdin, wait, SIGTERM, wait, SIGKILL) is
//! decided here, with its timers; the driver only performs each step and
//! reports what it sees (stdout and stderr bytes and EOFs, the exit status)
//! as soon as it sees it.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use crate::codec::jsonl::{JsonlConfig, JsonlDecoder, JsonlError};

/// Limits and grace periods of the stdio transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioConfig {
    /// Framing limits of the child's stdout.
    pub jsonl: JsonlConfig,
    /// After closing stdin, how long to wait before SIGTERM (default 2 s).
    pub stdin_grace: Duration,
    /// After SIGTERM, how long to wait before SIGKILL (default 2 s).
    pub term_grace: Duration,
    /// After stdout EOF without an exit status, how long to wait for the
    /// exit before giving up on it (default 1 s).
    pub exit_wait: Duration,
    /// After the exit, how long to wait for stdout and stderr to reach EOF
    /// before the exit is acted on anyway (default 500 ms).
    pub exit_grace: Duration,
    /// Lines of stderr kept for error messages (default 20).
    pub stderr_tail_lines: usize,
    /// Bytes of stderr kept for error messages (default 4 KiB).
    pub stderr_tail_bytes: usize,
    /// Longest stderr line passed on whole; longer ones are cut (default 8 KiB).
    pub max_stderr_line: usize,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            jsonl: JsonlConfig::default(),
            stdin_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            exit_wait: Duration::from_secs(1),
            exit_grace: Duration::from_millis(500),
            stderr_tail_lines: 20,
            stderr_tail_bytes: 4096,
            max_stderr_line: 8192,
        }
    }
}

/// How a child process ended, as the driver observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, if it exited normally.
    pub code: Option<i32>,
    /// The signal that killed it (Unix), if any.
    pub signal: Option<i32>,
}

impl ExitStatus {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "status {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            (None, None) => f.write_str("unknown status"),
        }
    }
}

/// A signal the driver must send to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM (on Windows: terminate the process).
    Terminate,
    /// SIGKILL.
    Kill,
}

/// What the stdio transport asks of the driver, from `Stdio::poll_output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StdioAction {
    Write(Vec<u8>),
    CloseStdin,
    Signal(Signal),
    Log(String),
    Malformed(JsonlError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// stdout ended or a write failed; waiting for the exit status.
    Dying {
        until: Instant,
    },
    /// Our close: stdin closed, waiting for the exit.
    ClosingStdin {
        until: Instant,
    },
    /// SIGTERM sent, waiting for the exit.
    Terminating {
        until: Instant,
    },
    /// SIGKILL sent, waiting for the exit (no timer: the kernel delivers).
    Killed,
    Exited,
}

/// Why a running child stopped serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Death {
    /// The exit status, when known.
    pub status: Option<ExitStatus>,
    /// What was seen first (for the message).
    pub what: &'static str,
}

/// The stdio transport's state.
#[derive(Debug)]
pub(crate) struct Stdio {
    config: StdioConfig,
    stdout: JsonlDecoder,
    stderr_partial: Vec<u8>,
    stderr_partial_cut: bool,
    tail: VecDeque<String>,
    tail_bytes: usize,
    phase: Phase,
    exit: Option<ExitStatus>,
    /// An exit reported while a pipe was still open, and until when it
    /// waits for them.
    held_exit: Option<(ExitStatus, Instant)>,
    stdout_eof: bool,
    stderr_eof: bool,
    actions: VecDeque<StdioAction>,
}

impl Stdio {
    pub fn new(config: StdioConfig) -> Self {
        Stdio {
            stdout: JsonlDecoder::with_config(config.jsonl),
            config,
            stderr_partial: Vec::new(),
            stderr_partial_cut: false,
            tail: VecDeque::new(),
            tail_bytes: 0,
            phase: Phase::Running,
            exit: None,
            held_exit: None,
            stdout_eof: false,
            stderr_eof: false,
            actions: VecDeque::new(),
        }
    }

    /// Queues one message (the engine's compact JSON) for stdin.
    pub fn send(&mut self, mut message: Vec<u8>) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        crate::codec::jsonl::end_line_in_place(&mut message);
        self.actions.push_back(StdioAction::Write(message));
    }

    /// Feeds stdout bytes; each complete line goes to `deliver`.
    pub fn handle_stdout(&mut self, bytes: &[u8], mut deliver: impl FnMut(&[u8])) {
        let actions = &mut self.actions;
        self.stdout.feed(bytes, |line| match line {
            Ok(line) => deliver(line),
            Err(e) => actions.push_back(StdioAction::Malformed(e)),
        });
    }

    /// stdout reached EOF. Returns a death when this ends a running child.
    pub fn handle_stdout_eof(&mut self, now: Instant) -> Option<Death> {
        self.stdout_eof = true;
        if let Some(e) = self.stdout.finish() {
            self.actions.push_back(StdioAction::Malformed(e));
        }
        if let Phase::Running = self.phase {
            self.phase = Phase::Dying {
                until: now + self.config.exit_wait,
            };
        }
        self.release_exit()
    }

    /// stderr reached EOF (a driver that does not pipe stderr reports it
    /// at once). Returns a death when an exit held for it ends a running
    /// child.
    pub fn handle_stderr_eof(&mut self) -> Option<Death> {
        self.stderr_eof = true;
        self.release_exit()
    }

    /// Acts on a held exit once both pipes have ended.
    fn release_exit(&mut self) -> Option<Death> {
        if !(self.stdout_eof && self.stderr_eof) {
            return None;
        }
        let (status, _) = self.held_exit.take()?;
        self.exit_now(status)
    }

    /// Writing to stdin failed (broken pipe): the child is going away.
    pub fn handle_write_failed(&mut self, now: Instant) {
        if let Phase::Running = self.phase {
            self.phase = Phase::Dying {
                until: now + self.config.exit_wait,
            };
        }
    }

    /// Feeds stderr bytes: one `Log` per line, and the tail kept.
    pub fn handle_stderr(&mut self, mut bytes: &[u8]) {
        let max = self.config.max_stderr_line;
        while !bytes.is_empty() {
            match memchr::memchr(b'\n', bytes) {
                Some(i) => {
                    let room = max.saturating_sub(self.stderr_partial.len());
                    let take = i.min(room);
                    self.stderr_partial.extend_from_slice(&bytes[..take]);
                    let cut = self.stderr_partial_cut || take < i;
                    bytes = &bytes[i + 1..];
                    self.finish_stderr_line(cut);
                }
                None => {
                    let room = max.saturating_sub(self.stderr_partial.len());
                    let take = bytes.len().min(room);
                    self.stderr_partial.extend_from_slice(&bytes[..take]);
                    if take < bytes.len() {
                        self.stderr_partial_cut = true;
                    }
                    return;
                }
            }
        }
    }

    fn finish_stderr_line(&mut self, cut: bool) {
        let raw = std::mem::take(&mut self.stderr_partial);
        self.stderr_partial_cut = false;
        let raw = match raw.split_last() {
            Some((b'\r', rest)) => rest,
            _ => &raw[..],
        };
        let mut line = String::from_utf8_lossy(raw).into_owned();
        if cut {
            line.push('…');
        }
        if line.trim().is_empty() {
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line.clone());
        while self.tail.len() > self.config.stderr_tail_lines
            || (self.tail_bytes > self.config.stderr_tail_bytes && self.tail.len() > 1)
        {
            if let Some(old) = self.tail.pop_front() {
                self.tail_bytes -= old.len();
            }
        }
        self.actions.push_back(StdioAction::Log(line));
    }

    /// The last lines of stderr, joined with newlines (a partial last line
    /// included), trimmed to the byte bound from the front.
    pub fn stderr_tail(&self) -> String {
        let mut lines: Vec<&str> = self.tail.iter().map(String::as_str).collect();
        let partial;
        if !self.stderr_partial.is_empty() {
            partial = String::from_utf8_lossy(&self.stderr_partial);
            if !partial.trim().is_empty() {
                lines.push(partial.trim_end());
            }
        }
        let mut text = lines.join("\n");
        let max = self.config.stderr_tail_bytes;
        if text.len() > max {
            let mut start = text.len() - max;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text = format!("…{}", &text[start..]);
        }
        text
    }

    /// The child exited. It is acted on once stdout and stderr have ended
    /// (or `exit_grace` passed); returns a death when that ends a child
    /// that was not ours to end.
    pub fn handle_exit(&mut self, now: Instant, status: ExitStatus) -> Option<Death> {
        if self.exit.is_some() || self.held_exit.is_some() {
            return None; // reported twice: the first report stands
        }
        self.held_exit = Some((status, now + self.config.exit_grace));
        self.release_exit()
    }

    fn exit_now(&mut self, status: ExitStatus) -> Option<Death> {
        self.exit = Some(status);
        if !self.stderr_partial.is_empty() {
            let cut = self.stderr_partial_cut;
            self.finish_stderr_line(cut);
        }
        let was = self.phase;
        self.phase = Phase::Exited;
        match was {
            Phase::Running | Phase::Dying { .. } => Some(Death {
                status: Some(status),
                what: "exited",
            }),
            _ => None,
        }
    }

    /// Starts the graceful shutdown (no-op once started or exited).
    pub fn begin_close(&mut self, now: Instant) {
        match self.phase {
            Phase::Running | Phase::Dying { .. } => {
                self.actions.push_back(StdioAction::CloseStdin);
                self.phase = Phase::ClosingStdin {
                    until: now + self.config.stdin_grace,
                };
            }
            _ => {}
        }
    }

    /// Whether the transport still expects an exit report.
    pub fn awaiting_exit(&self) -> bool {
        !matches!(self.phase, Phase::Exited)
    }

    /// Timers: returns a death when the wait for an exit after stdout EOF
    /// ran out while the child was still running, or when an exit held for
    /// the pipes is acted on.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Death> {
        if let Some((status, until)) = self.held_exit {
            if now >= until {
                self.held_exit = None;
                return self.exit_now(status);
            }
        }
        match self.phase {
            Phase::Dying { until } if now >= until => {
                // It closed stdout (or stdin broke) but did not exit: it is
                // of no use any more; shut it down the polite way.
                self.actions.push_back(StdioAction::CloseStdin);
                self.phase = Phase::ClosingStdin {
                    until: now + self.config.stdin_grace,
                };
                Some(Death {
                    status: None,
                    what: if self.stdout_eof {
                        "closed its stdout"
                    } else {
                        "stopped reading its stdin"
                    },
                })
            }
            Phase::ClosingStdin { until } if now >= until => {
                self.actions
                    .push_back(StdioAction::Signal(Signal::Terminate));
                self.phase = Phase::Terminating {
                    until: now + self.config.term_grace,
                };
                None
            }
            Phase::Terminating { until } if now >= until => {
                self.actions.push_back(StdioAction::Signal(Signal::Kill));
                self.phase = Phase::Killed;
                None
            }
            _ => None,
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Dying { until }
            | Phase::ClosingStdin { until }
            | Phase::Terminating { until } => Some(until),
            _ => None,
        };
        let held = self.held_exit.map(|(_, until)| until);
        phase.into_iter().chain(held).min()
    }

    /// The next action, if any.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<StdioAction> {
        self.actions.pop_front()
    }

    /// The message for a death: `server exited with status 7: <tail>`.
    pub fn death_message(&self, death: &Death) -> String {
        let mut msg = match death.status {
            Some(s) => format!("server exited with {s}"),
            None => format!("server {}", death.what),
        };
        let tail = self.stderr_tail();
        if !tail.is_empty() {
            msg.push_str(": ");
            msg.push_str(&tail);
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Stdio) -> Vec<StdioAction> {
        std::iter::from_fn(|| s.poll_output()).collect()
    }

    #[test]
    fn stderr_lines_are_logged_and_the_tail_is_bounded() {
        let mut s = Stdio::new(StdioConfig {
            stderr_tail_lines: 2,
            max_stderr_line: 10,
            ..StdioConfig::default()
        });
        s.handle_stderr(b"one\r\ntw");
        s.handle_stderr(b"o\n\nthree is a long line\nfour");
        let logs: Vec<_> = drain(&mut s)
            .into_iter()
            .map(|a| match a {
                StdioAction::Log(l) => l,
                a => panic!("{a:?}"),
            })
            .collect();
        assert_eq!(logs, ["one", "two", "three is a…"]);
        assert_eq!(s.stderr_tail(), "two\nthree is a…\nfour");
        let t0 = Instant::now();
        assert_eq!(s.handle_stdout_eof(t0), None);
        assert_eq!(s.handle_stderr_eof(), None);
        let death = s.handle_exit(
            t0,
            ExitStatus {
                code: Some(7),
                signal: None,
            },
        );
        let death = death.unwrap();
        assert_eq!(
            s.death_message(&death),
            "server exited with status 7: three is a…\nfour"
        );
    }

    #[test]
    fn graceful_close_escalates_on_timers() {
        let t0 = Instant::now();
        let mut s = Stdio::new(StdioConfig::default());
        s.begin_close(t0);
        assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(2)));
        assert_eq!(s.handle_timeout(t0 + Duration::from_secs(1)), None);
        assert!(drain(&mut s).is_empty());
        s.handle_timeout(t0 + Duration::from_secs(2));
        assert_eq!(drain(&mut s), [StdioAction::Signal(Signal::Terminate)]);
        s.handle_timeout(t0 + Duration::from_secs(4));
        assert_eq!(drain(&mut s), [StdioAction::Signal(Signal::Kill)]);
        assert_eq!(s.poll_timeout(), None);
        let t5 = t0 + Duration::from_secs(5);
        let killed = ExitStatus {
            code: None,
            signal: Some(9),
        };
        assert_eq!(s.handle_exit(t5, killed), None);
        // Held for the pipes (at most exit_grace), then over: ours to end.
        assert!(s.awaiting_exit());
        assert_eq!(s.poll_timeout(), Some(t5 + Duration::from_millis(500)));
        assert_eq!(s.handle_timeout(t5 + Duration::from_millis(500)), None);
        assert!(!s.awaiting_exit());
    }

    #[test]
    fn an_exit_is_held_until_both_pipes_end_or_the_grace_passes() {
        let t0 = Instant::now();
        let status = ExitStatus {
            code: Some(3),
            signal: None,
        };
        // Pipes end after the exit: the exit is acted on at the last EOF,
        // and the last words on stderr are in the message.
        let mut s = Stdio::new(StdioConfig::default());
        assert_eq!(s.handle_exit(t0, status), None);
        s.handle_stderr(b"boom");
        assert_eq!(s.handle_stdout_eof(t0), None);
        let d = s.handle_stderr_eof().unwrap();
        assert_eq!(s.death_message(&d), "server exited with status 3: boom");
        assert_eq!(
            s.handle_exit(t0, status),
            None,
            "a second report is ignored"
        );

        // A grandchild keeps stderr open: the exit counts after the grace.
        let mut s = Stdio::new(StdioConfig::default());
        s.handle_stdout_eof(t0);
        assert_eq!(s.handle_exit(t0, status), None);
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_millis(500)));
        assert_eq!(s.handle_timeout(t0 + Duration::from_millis(499)), None);
        let d = s.handle_timeout(t0 + Duration::from_millis(500)).unwrap();
        assert_eq!(s.death_message(&d), "server exited with status 3");
    }

    #[test]
    fn stdout_eof_waits_for_the_exit_status() {
        let t0 = Instant::now();
        let mut s = Stdio::new(StdioConfig::default());
        s.handle_stderr(b"fatal: missing API key\n");
        drain(&mut s);
        assert_eq!(s.handle_stdout_eof(t0), None);
        assert_eq!(s.handle_stderr_eof(), None);
        let d = s
            .handle_exit(
                t0,
                ExitStatus {
                    code: Some(1),
                    signal: None,
                },
            )
            .unwrap();
        assert_eq!(
            s.death_message(&d),
            "server exited with status 1: fatal: missing API key"
        );

        // No exit within exit_wait: the death is declared and shutdown begins.
        let mut s = Stdio::new(StdioConfig::default());
        s.handle_stdout_eof(t0);
        let d = s.handle_timeout(t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(s.death_message(&d), "server closed its stdout");
        assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
    }
}
