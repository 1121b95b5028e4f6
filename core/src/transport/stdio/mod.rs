//! The stdio transport: a child process speaking JSONL on stdin/stdout.
//!
//! ```text
//!   messages ──► Write(json + "\n") ──► child stdin
//!   child stdout ──► JsonlDecoder ──► engine.handle_message(line)
//!   child stderr ──► bounded tail + one Log per line
//!
//!   close():  CloseStdin ─(stdin_grace)─► Signal(Terminate) ─(term_grace)─► Signal(Kill)
//!             any step ends as soon as the child has exited and its
//!             process group is empty
//!   group:    signals go to the child's process group (wrappers such as
//!             `npx`, `uvx`, `sh -c` leave the server a grandchild); after
//!             the child's exit the steps go on for what is left of the
//!             group, with CheckGroup every 10..200 ms, until the driver
//!             reports GroupEmpty (SIGKILL unanswered for term_grace: given up)
//!   crash:    stdout EOF / Exited while running ─► every pending request fails with
//!             "server exited with status N: <stderr tail>"
//!   exit:     Exited is held until stdout and stderr reached EOF, or exit_grace
//!             passed (a grandchild may keep a pipe open), so that the error
//!             quotes the server's last words on stderr
//!   restart:  restart() ─► CloseStdin + Signal(Terminate) ─(restart_grace)─► Signal(Kill)
//!             once the exit is known and the group empty ─► Spawn; every input
//!             until Spawned is the old process's and is ignored; then the same
//!             transport serves the new process (its predecessor's stderr tail is
//!             kept for the error messages)
//! ```
//!
//! The spec's shutdown order (close stdin, wait, SIGTERM, wait, SIGKILL) is
//! decided here, with its timers; the driver only performs each step and
//! reports what it sees (stdout and stderr bytes and EOFs, the exit status)
//! as soon as it sees it.

use crate::codec::jsonl::Line;
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
    /// When a server is started again (after the era probe found it dead
    /// or silent), how long the old process has after SIGTERM before
    /// SIGKILL (default 300 ms: it is of no use, only its clean-up is
    /// waited for).
    pub restart_grace: Duration,
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
            restart_grace: Duration::from_millis(300),
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

/// A signal the driver must send to the child's process group (to the
/// child alone when it has no group of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM (on Windows: terminate the process).
    Terminate,
    /// SIGKILL.
    Kill,
}

/// The first wait between two `CheckGroup`s; it doubles up to
/// [`GROUP_CHECK_MAX`].
const GROUP_CHECK_FIRST: Duration = Duration::from_millis(10);
const GROUP_CHECK_MAX: Duration = Duration::from_millis(200);

/// What the stdio transport asks of the driver, from `Stdio::poll_output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StdioAction {
    CloseStdin,
    Signal(Signal),
    /// Is any process of the child's group left? (answer: `handle_group_empty`)
    CheckGroup,
    /// Start the server again (answer: `handle_spawned` or
    /// `handle_spawn_failed`).
    Spawn,
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
    /// SIGKILL sent, waiting for the exit (no timer: the kernel delivers)
    /// and, once the child has exited, for its group to empty (until
    /// then; a process that survives SIGKILL is given up on).
    Killed {
        until: Option<Instant>,
    },
    /// The child exited and its group is empty (or given up on).
    Exited,
    /// The child is stopped and `Spawn` was asked: waiting for the new
    /// one. Inputs until then are the old process's.
    Spawning,
}

/// A restart in progress (see [`Stdio::restart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    /// None asked.
    No,
    /// The old process is being stopped; `Spawn` once it is.
    Stopping,
    /// A close came while `Spawn` was out: stop the new process as soon as
    /// it is reported.
    ThenClose,
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
    /// The driver reported that no process of the child's group is left.
    group_empty: bool,
    /// After the child's exit, while its group is not known empty: when
    /// to check next, and the wait after that.
    next_check: Option<(Instant, Duration)>,
    restart: Restart,
    /// The last stderr lines of the process this one replaced, and why it
    /// was replaced.
    previous: Option<(String, String)>,
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
            group_empty: false,
            next_check: None,
            restart: Restart::No,
            previous: None,
            actions: VecDeque::new(),
        }
    }

    /// Whether the inputs now come from a process that is being replaced
    /// and whose output nobody reads any more.
    fn stale(&self) -> bool {
        self.phase == Phase::Spawning
    }

    /// Stops the child (stdin closed and SIGTERM at once, SIGKILL after
    /// [`StdioConfig::restart_grace`]) and, once it and its group are gone,
    /// asks for a new one ([`StdioAction::Spawn`]). `why` is kept, with the
    /// old stderr tail, for the error messages of the new process. Nothing
    /// is sent until the new process is reported (`send` drops what comes
    /// meanwhile: the caller holds its messages until then).
    pub fn restart(&mut self, now: Instant, why: &str) {
        if self.restart != Restart::No || self.phase == Phase::Spawning {
            return;
        }
        self.restart = Restart::Stopping;
        self.previous = Some((self.stderr_tail(), why.to_owned()));
        let grace = self.config.restart_grace;
        match self.phase {
            Phase::Running | Phase::Dying { .. } => {
                self.actions.push_back(StdioAction::CloseStdin);
                self.actions
                    .push_back(StdioAction::Signal(Signal::Terminate));
                self.phase = Phase::Terminating { until: now + grace };
            }
            Phase::ClosingStdin { .. } => {
                self.actions
                    .push_back(StdioAction::Signal(Signal::Terminate));
                self.phase = Phase::Terminating { until: now + grace };
            }
            Phase::Terminating { until } => {
                self.phase = Phase::Terminating {
                    until: until.min(now + grace),
                };
            }
            Phase::Killed { .. } | Phase::Exited | Phase::Spawning => {}
        }
        self.spawn_when_stopped();
    }

    /// Asks for the new process once the old one is gone.
    fn spawn_when_stopped(&mut self) {
        if self.restart == Restart::Stopping && self.phase == Phase::Exited {
            self.restart = Restart::No;
            self.phase = Phase::Spawning;
            self.actions.push_back(StdioAction::Spawn);
        }
    }

    /// The new process asked for by [`StdioAction::Spawn`] is running:
    /// from now on every input is its own.
    pub fn handle_spawned(&mut self, now: Instant) {
        if self.phase != Phase::Spawning {
            return;
        }
        self.stdout = JsonlDecoder::with_config(self.config.jsonl);
        self.stderr_partial.clear();
        self.stderr_partial_cut = false;
        self.tail.clear();
        self.tail_bytes = 0;
        self.phase = Phase::Running;
        self.exit = None;
        self.held_exit = None;
        self.stdout_eof = false;
        self.stderr_eof = false;
        self.group_empty = false;
        self.next_check = None;
        if self.restart == Restart::ThenClose {
            self.restart = Restart::No;
            self.begin_close(now);
        }
    }

    /// The new process could not be started: there is nothing left to
    /// stop. The message for the caller; `None` when no start was asked
    /// for (an executor's stray report changes nothing).
    pub fn handle_spawn_failed(&mut self, error: &str) -> Option<String> {
        if self.phase != Phase::Spawning {
            return None;
        }
        self.phase = Phase::Exited;
        self.restart = Restart::No;
        let mut message = format!("could not start the server again: {error}");
        self.push_previous(&mut message);
        Some(message)
    }

    /// Appends what the process before this one said, if it was replaced.
    fn push_previous(&self, message: &mut String) {
        if let Some((tail, why)) = &self.previous {
            message.push_str(&format!(" (an earlier start of it {why}"));
            if !tail.is_empty() {
                message.push_str(&format!("; its stderr: {tail}"));
            }
            message.push(')');
        }
    }

    /// One message the engine wrote, as the line to write to stdin now
    /// (`None` unless the child runs: what is sent while it starts or
    /// stops is dropped, and its request fails with the child's end). The
    /// message is compact, without a raw line break (its envelope is the
    /// engine's own, which strips those of what it copies from raw JSON),
    /// so only the newline is added. Lines go straight to the
    /// connection's output: they keep their order among themselves, and
    /// nothing else this transport asks for needs to come between them.
    pub fn send(&mut self, mut message: Vec<u8>) -> Option<Vec<u8>> {
        debug_assert!(memchr::memchr2(b'\n', b'\r', &message).is_none());
        if !matches!(self.phase, Phase::Running) {
            return None;
        }
        message.push(b'\n');
        Some(message)
    }

    /// Feeds stdout bytes; each complete line goes to `deliver`.
    pub fn handle_stdout(&mut self, bytes: &[u8], mut deliver: impl FnMut(Line<'_>)) {
        if self.stale() {
            return;
        }
        let actions = &mut self.actions;
        self.stdout.feed_lines(bytes, |line| match line {
            Ok(line) => deliver(line),
            Err(e) => actions.push_back(StdioAction::Malformed(e)),
        });
    }

    /// stdout reached EOF. Returns a death when this ends a running child.
    pub fn handle_stdout_eof(&mut self, now: Instant) -> Option<Death> {
        if self.stale() {
            return None;
        }
        self.stdout_eof = true;
        if let Some(e) = self.stdout.finish() {
            self.actions.push_back(StdioAction::Malformed(e));
        }
        if let Phase::Running = self.phase {
            self.phase = Phase::Dying {
                until: now + self.config.exit_wait,
            };
        }
        self.release_exit(now)
    }

    /// stderr reached EOF (a driver that does not pipe stderr reports it
    /// at once). Returns a death when an exit held for it ends a running
    /// child.
    pub fn handle_stderr_eof(&mut self, now: Instant) -> Option<Death> {
        if self.stale() {
            return None;
        }
        self.stderr_eof = true;
        self.release_exit(now)
    }

    /// Acts on a held exit once both pipes have ended.
    fn release_exit(&mut self, now: Instant) -> Option<Death> {
        if !(self.stdout_eof && self.stderr_eof) {
            return None;
        }
        let (status, _) = self.held_exit.take()?;
        self.exit_now(now, status)
    }

    /// Writing to stdin failed (broken pipe): the child is going away.
    pub fn handle_write_failed(&mut self, now: Instant) {
        if self.stale() {
            return;
        }
        if let Phase::Running = self.phase {
            self.phase = Phase::Dying {
                until: now + self.config.exit_wait,
            };
        }
    }

    /// Feeds stderr bytes: one `Log` per line, and the tail kept.
    pub fn handle_stderr(&mut self, mut bytes: &[u8]) {
        if self.stale() {
            return;
        }
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
        if self.stale() || self.exit.is_some() || self.held_exit.is_some() {
            return None; // reported twice: the first report stands
        }
        self.held_exit = Some((status, now + self.config.exit_grace));
        self.release_exit(now)
    }

    fn exit_now(&mut self, now: Instant, status: ExitStatus) -> Option<Death> {
        self.exit = Some(status);
        if !self.stderr_partial.is_empty() {
            let cut = self.stderr_partial_cut;
            self.finish_stderr_line(cut);
        }
        let was = self.phase;
        self.phase = if self.group_empty {
            Phase::Exited
        } else {
            // What is left of the group goes the same way: a crash or an
            // exit of its own starts the polite steps, a close goes on
            // where it was.
            self.actions.push_back(StdioAction::CheckGroup);
            self.next_check = Some((now + GROUP_CHECK_FIRST, GROUP_CHECK_FIRST * 2));
            match was {
                Phase::Running | Phase::Dying { .. } => {
                    self.actions.push_back(StdioAction::CloseStdin);
                    Phase::ClosingStdin {
                        until: now + self.config.stdin_grace,
                    }
                }
                Phase::Killed { .. } => Phase::Killed {
                    until: Some(now + self.config.term_grace),
                },
                other => other,
            }
        };
        self.spawn_when_stopped();
        match was {
            Phase::Running | Phase::Dying { .. } => Some(Death {
                status: Some(status),
                what: "exited",
            }),
            _ => None,
        }
    }

    /// The driver found no process of the child's group left (or the
    /// child has no group of its own). Once the child's exit is known too,
    /// the server is stopped.
    pub fn handle_group_empty(&mut self) {
        if self.stale() {
            return;
        }
        self.group_empty = true;
        self.next_check = None;
        if self.exit.is_some() {
            self.phase = Phase::Exited;
        }
        self.spawn_when_stopped();
    }

    /// Starts the graceful shutdown (no-op once started or exited). During
    /// a restart no new process is asked for; one already asked for is
    /// stopped as soon as it is reported.
    pub fn begin_close(&mut self, now: Instant) {
        match self.restart {
            Restart::Stopping => self.restart = Restart::No,
            Restart::No if self.phase == Phase::Spawning => self.restart = Restart::ThenClose,
            _ => {}
        }
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
                return self.exit_now(now, status);
            }
        }
        if let Some((at, wait)) = self.next_check {
            if now >= at {
                self.actions.push_back(StdioAction::CheckGroup);
                self.next_check = Some((now + wait, (wait * 2).min(GROUP_CHECK_MAX)));
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
                self.phase = Phase::Killed {
                    until: self.exit.map(|_| now + self.config.term_grace),
                };
                None
            }
            Phase::Killed { until: Some(until) } if now >= until => {
                // Alive after SIGKILL (uninterruptible sleep, or another
                // user's process): nothing more can be done about it.
                self.actions.push_back(StdioAction::Log(
                    "mcpwire: processes of the server's group outlived SIGKILL; giving up on them"
                        .to_owned(),
                ));
                self.phase = Phase::Exited;
                self.next_check = None;
                self.spawn_when_stopped();
                None
            }
            _ => None,
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Dying { until }
            | Phase::ClosingStdin { until }
            | Phase::Terminating { until }
            | Phase::Killed { until: Some(until) } => Some(until),
            _ => None,
        };
        let held = self.held_exit.map(|(_, until)| until);
        let check = self.next_check.map(|(at, _)| at);
        phase.into_iter().chain(held).chain(check).min()
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
        self.push_previous(&mut msg);
        msg
    }
}

#[cfg(test)]
mod tests;
