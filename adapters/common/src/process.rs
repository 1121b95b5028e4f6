//! The OS facts the stdio transport needs: starting the server in a
//! process group of its own, signalling that group (or the child), telling
//! whether anything of the group is left, and reading an exit status.
//! Public so that `mcpwire-blocking`, which has no async driver, uses the
//! same functions.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mcpwire::transport::stdio::{ExitStatus, Signal};
use mcpwire::ServerConfig;

/// The command of a stdio server (`command`, `args`, `env`, `cwd`) with
/// piped stdin, stdout and stderr, for every adapter to spawn its way
/// (tokio and async-process convert a `std::process::Command`).
///
/// On Unix the child leads a process group of its own, so that what a
/// wrapper (`npx`, `uvx`, `sh -c`, `docker run`) starts is stopped with
/// it: see [`Group`]. (It also means a terminal's Ctrl-C reaches the
/// client, not the server: the client stops the server.)
///
/// On Windows the command is found and started by the rules of
/// [`crate::launch`]: through `PATH` × `PATHEXT`, a `.cmd` or `.bat`
/// (`npx`) through `cmd.exe` with its arguments quoted for it. An
/// argument cmd.exe cannot pass on (a line break) is an `InvalidInput`
/// error here.
pub fn command(server: &ServerConfig) -> std::io::Result<Command> {
    let program = server.command.as_deref().unwrap_or_default();
    #[cfg(windows)]
    let mut cmd = windows_command(server, program)?;
    #[cfg(not(windows))]
    let mut cmd = {
        let mut cmd = Command::new(program);
        cmd.args(&server.args);
        cmd
    };
    cmd.envs(&server.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    Ok(cmd)
}

/// `program` and the server's arguments as [`crate::launch::plan`] says
/// to start them, in the environment this child will have.
#[cfg(windows)]
fn windows_command(server: &ServerConfig, program: &str) -> std::io::Result<Command> {
    use crate::launch::{child_var, plan, Env, Launch};
    use std::os::windows::process::CommandExt;

    let ours = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let path = child_var(&server.env, "PATH", ours);
    let pathext = child_var(&server.env, "PATHEXT", ours);
    let system_root = ours("SystemRoot");
    let comspec = ours("ComSpec");
    let mut dir = std::env::current_dir()?;
    if let Some(cwd) = &server.cwd {
        dir = dir.join(cwd);
    }
    let dir = dir.to_string_lossy();
    let is_file = |p: &str| std::path::Path::new(p).is_file();
    let env = Env {
        path: path.as_deref(),
        pathext: pathext.as_deref(),
        dir: &dir,
        system_root: system_root.as_deref(),
        comspec: comspec.as_deref(),
        is_file: &is_file,
    };
    Ok(match plan(program, &server.args, &env)? {
        Launch::Program { program, args } => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
        Launch::Batch {
            program,
            command_line,
        } => {
            let mut cmd = Command::new(program);
            cmd.raw_arg(command_line);
            cmd
        }
    })
}

/// A way to ask how much of what was written to a child's stdin it has
/// not read yet: the answer to the connection's `CheckStdin` (the era
/// probe tells a server still starting from one that read the probe and
/// stays silent). On Unix a duplicate of the pipe's write end asked with
/// `FIONREAD`; it holds the pipe open, so it must be dropped with the
/// stdin it probes (else the child never sees EOF).
#[derive(Debug)]
pub struct StdinProbe {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

impl StdinProbe {
    /// A probe of `stdin` (a pipe's write end); `None` if it cannot be
    /// duplicated.
    #[cfg(unix)]
    pub fn of(stdin: &impl std::os::fd::AsFd) -> Option<StdinProbe> {
        let fd = stdin.as_fd().try_clone_to_owned().ok()?;
        Some(StdinProbe { fd })
    }

    /// Bytes in the pipe that the child has not read, if the OS tells.
    pub fn unread(&self) -> Option<usize> {
        #[cfg(unix)]
        {
            rustix::io::ioctl_fionread(&self.fd)
                .ok()
                .map(|n| n as usize)
        }
        #[cfg(not(unix))]
        None
    }
}

/// The process group of a child started from [`command`]: on Unix the
/// group it leads, on Windows the id of the process that [`Group::new`]
/// puts in a Job Object of its own.
pub fn group_of(pid: Option<u32>) -> Option<u32> {
    if cfg!(any(unix, windows)) {
        pid
    } else {
        None
    }
}

/// The process group of a stdio server, for the driver's `Signal` and
/// `CheckGroup` outputs. Forgotten once found empty (its id may then be
/// reused); dropped while not known empty, it kills the group.
///
/// On Windows (untested here: these machines run Linux) the group is a Job
/// Object the child is put in right after it started (a process it started
/// before that is not in it): both signals terminate the job, it is empty
/// when it has no active process, and closing it kills what is left.
#[derive(Debug)]
pub struct Group {
    pgid: Option<u32>,
    #[cfg(windows)]
    job: Option<job::Job>,
}

impl Group {
    /// The group `pgid` (from [`group_of`]), or none.
    pub fn new(pgid: Option<u32>) -> Group {
        #[cfg(windows)]
        {
            let job = pgid.and_then(job::Job::for_process);
            Group {
                pgid: pgid.filter(|_| job.is_some()),
                job,
            }
        }
        #[cfg(not(windows))]
        Group { pgid }
    }

    fn forget(&mut self) {
        self.pgid = None;
        #[cfg(windows)]
        {
            self.job = None;
        }
    }

    /// Whether there is a group that is not known empty.
    pub fn is_known(&self) -> bool {
        self.pgid.is_some()
    }

    /// Sends `sig` to every process of the group. Returns `false` when
    /// none was left (the group is then forgotten).
    pub fn signal(&mut self, sig: Signal) -> bool {
        let Some(pgid) = self.pgid else { return false };
        #[cfg(windows)]
        let alive = {
            let _ = (pgid, sig);
            self.job.as_ref().is_some_and(|j| {
                j.terminate();
                j.active()
            })
        };
        #[cfg(not(windows))]
        let alive = signal_group(pgid, Some(sig));
        if !alive {
            self.forget();
        }
        self.pgid.is_some()
    }

    /// Whether any process of the group is left that is not a zombie (an
    /// orphan's zombie stays in the group until init reaps it, and some
    /// container inits never do). Returns `false` once none is (the group
    /// is then forgotten).
    pub fn check(&mut self) -> bool {
        let Some(pgid) = self.pgid else { return false };
        #[cfg(windows)]
        let alive = {
            let _ = pgid;
            self.job.as_ref().is_some_and(job::Job::active)
        };
        #[cfg(not(windows))]
        let alive = signal_group(pgid, None) && live_member(pgid) != Some(false);
        if !alive {
            self.forget();
        }
        self.pgid.is_some()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Windows: closing the job (its own Drop) kills what is left.
        #[cfg(not(windows))]
        if let Some(pgid) = self.pgid {
            signal_group(pgid, Some(Signal::Kill));
        }
    }
}

/// The Job Object of a stdio server on Windows.
#[cfg(windows)]
#[allow(unsafe_code)]
mod job {
    use std::ffi::c_void;
    use std::mem::{size_of, zeroed};
    use std::ptr::{null, null_mut};

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation,
        JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
        TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    };
    use windows_sys::Win32::System::Threading::{
        OpenProcess, PROCESS_SET_QUOTA, PROCESS_TERMINATE,
    };

    /// An owned job handle; closing it kills the processes in it.
    #[derive(Debug)]
    pub(super) struct Job(HANDLE);

    // SAFETY: a job handle may be used and closed from any thread.
    unsafe impl Send for Job {}
    unsafe impl Sync for Job {}

    impl Job {
        /// A new job that kills its processes when closed, with process
        /// `pid` in it; `None` if any step fails (the child is then
        /// signalled alone).
        pub(super) fn for_process(pid: u32) -> Option<Job> {
            // SAFETY: plain Win32 calls on handles owned here; the info
            // structs are plain data, zeroed then filled.
            unsafe {
                let handle = CreateJobObjectW(null(), null());
                if handle.is_null() {
                    return None;
                }
                let job = Job(handle);
                let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = zeroed();
                info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
                let set = SetInformationJobObject(
                    job.0,
                    JobObjectExtendedLimitInformation,
                    (&raw const info).cast::<c_void>(),
                    size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                );
                if set == 0 {
                    return None;
                }
                let process = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid);
                if process.is_null() {
                    return None;
                }
                let assigned = AssignProcessToJobObject(job.0, process);
                CloseHandle(process);
                (assigned != 0).then_some(job)
            }
        }

        /// Terminates every process of the job.
        pub(super) fn terminate(&self) {
            // SAFETY: a valid job handle.
            unsafe {
                TerminateJobObject(self.0, 1);
            }
        }

        /// Whether a process of the job is still active (or it cannot
        /// tell).
        pub(super) fn active(&self) -> bool {
            // SAFETY: a valid job handle and a plain-data out struct of
            // the size given.
            unsafe {
                let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = zeroed();
                let ok = QueryInformationJobObject(
                    self.0,
                    JobObjectBasicAccountingInformation,
                    (&raw mut info).cast::<c_void>(),
                    size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                    null_mut(),
                );
                ok == 0 || info.ActiveProcesses > 0
            }
        }
    }

    impl Drop for Job {
        fn drop(&mut self) {
            // SAFETY: the handle is owned and closed once.
            unsafe {
                CloseHandle(self.0);
            }
        }
    }
}

/// `kill(-pgid, sig)` (`None`: signal 0, a check). Returns `false` when no
/// process of the group was found (ESRCH).
#[cfg(not(windows))]
fn signal_group(pgid: u32, sig: Option<Signal>) -> bool {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal as S};
        let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
            return false;
        };
        let r = match sig {
            None => test_kill_process_group(pid),
            Some(Signal::Terminate) => kill_process_group(pid, S::TERM),
            Some(Signal::Kill) => kill_process_group(pid, S::KILL),
        };
        match r {
            Ok(()) => true,
            Err(rustix::io::Errno::SRCH) => false,
            Err(e) => {
                // EPERM: a member changed user; it is still there.
                tracing::debug!("signal {sig:?} to group {pgid}: {e}");
                true
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (pgid, sig);
        false
    }
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie;
/// `None` when it cannot tell (no procfs).
#[cfg(not(windows))]
fn live_member(pgid: u32) -> Option<bool> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let pgid = pgid.to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let mut path = entry.path();
        path.push("stat");
        let Ok(stat) = std::fs::read(&path) else {
            continue; // gone meanwhile
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold anything but
        // ends at the last `)`.
        let Some(end) = stat.iter().rposition(|&b| b == b')') else {
            continue;
        };
        let mut fields = stat[end + 1..]
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty());
        let (Some(state), Some(_ppid), Some(pgrp)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if pgrp == pgid.as_bytes() && !matches!(state, b"Z" | b"X") {
            return Some(true);
        }
    }
    Some(false)
}

/// Sends `sig` to process `pid` (best effort: it may have exited).
pub fn signal(pid: u32, sig: Signal) {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process, Pid, Signal as S};
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        let s = match sig {
            Signal::Terminate => S::TERM,
            Signal::Kill => S::KILL,
        };
        if let Err(e) = kill_process(pid, s) {
            tracing::debug!("signal {sig:?} to {pid:?}: {e}");
        }
    }
    #[cfg(not(unix))]
    {
        // No SIGTERM elsewhere: both steps terminate the process.
        let _ = std::process::Command::new("taskkill")
            .args(["/F", "/PID", &pid.to_string()])
            .status();
        let _ = sig;
    }
}

/// The `Child::wait` contract for a `std::process::Child` reaped
/// elsewhere (a thread, a blocking pool): held by the wait future, it
/// kills the process when that future is dropped before the exit.
#[derive(Debug)]
pub struct KillOnDrop {
    pid: u32,
    exited: Arc<AtomicBool>,
}

impl KillOnDrop {
    /// A guard for process `pid`, and the flag its reaper sets to `true`
    /// once `wait` has returned.
    pub fn new(pid: u32) -> (KillOnDrop, Arc<AtomicBool>) {
        let exited = Arc::new(AtomicBool::new(false));
        let guard = KillOnDrop {
            pid,
            exited: exited.clone(),
        };
        (guard, exited)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.exited.load(Ordering::SeqCst) {
            signal(self.pid, Signal::Kill);
        }
    }
}

/// Whether to read a stdio server's stdout right after writing a lone
/// call. On a shared CPU the server answers before the writer runs again
/// and the read finds the answer, sparing the runtime's wait; on another
/// CPU it finds the pipe empty, a wasted system call. A read that finds
/// nothing counts against, one that finds the answer for; while the
/// count is negative only one write in [`AfterWrite::PROBE`] is followed
/// by a read, to notice when it pays again.
///
/// While it pays, one write in `PROBE` is not followed by a read all the
/// same: a caller that starts calls together (`join_all`, a
/// `FuturesUnordered`) would otherwise see each answered before it starts
/// the next, one read per call; left to wait once, its other calls start
/// meanwhile. A write made while other calls are in flight (a crowded
/// one) then stops reads after writes for the next [`AfterWrite::QUIET`]
/// writes: the caller starts calls together, and the runtime's wait
/// gathers their answers in one read.
#[derive(Debug, Clone, Default)]
pub struct AfterWrite {
    /// Recent finds minus misses, in `-1..=2`.
    score: i8,
    /// Writes seen, modulo `PROBE`.
    count: u8,
    /// Writes still to come without a read after them.
    quiet: u16,
}

impl AfterWrite {
    /// One write in this many goes against the rule: it is not followed
    /// by a read while reads pay, and is while they do not.
    pub const PROBE: u8 = 32;

    /// Whether to read stdout now, after a write made with `in_flight`
    /// calls in flight; `ready` when the write went whole and stdout is
    /// open. Only for a lone call: with others in flight stdout holds
    /// their answers, and reading them one write at a time would split
    /// the batches the runtime's wait gathers (the write is crowded);
    /// with none (a notification, an answer to the server) nothing is
    /// coming. If it says to read, say what the read found
    /// ([`found`](Self::found)).
    pub fn should_read(&mut self, in_flight: usize, ready: bool) -> bool {
        match in_flight {
            0 => false,
            1 => ready && self.try_now(),
            _ => {
                self.crowded();
                false
            }
        }
    }

    /// Whether a lone call's write is followed by a read.
    fn try_now(&mut self) -> bool {
        if self.quiet > 0 {
            self.quiet -= 1;
            return false;
        }
        self.count = (self.count + 1) % Self::PROBE;
        (self.score >= 0) != (self.count == 0)
    }

    /// How many writes follow a crowded one without a read after them.
    pub const QUIET: u16 = 128;

    /// A write was made while other calls were in flight.
    fn crowded(&mut self) {
        self.quiet = Self::QUIET;
    }

    /// What a read after a write found: bytes (or the end) or nothing.
    pub fn found(&mut self, answer: bool) {
        self.score = if answer {
            (self.score + 1).clamp(0, 2)
        } else {
            (self.score - 1).max(-1)
        };
    }
}

/// The driver's word to a stdio server's stdout that its next read is to
/// try the pipe itself, whatever the runtime last saw of it
/// ([`Child::read_now`](crate::runtime::Child::read_now)): given right
/// after a lone call was written, when the answer is often there already
/// but a runtime that learns of readiness only from its own wait does not
/// know it yet.
#[derive(Debug, Clone, Default)]
pub struct ReadNow(Arc<AtomicBool>);

impl ReadNow {
    /// Asks for one read of the pipe itself.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a read was asked for (once: it clears the request).
    pub fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// One read of a nonblocking pipe, whatever its runtime last saw of it
/// (`WouldBlock` when it is empty). For a read after a write: the
/// runtime's readiness tracking only learns of the answer from its next
/// wait, and if its reactor had already collected the data's edge it
/// reports it later as a spurious wake-up, which costs at most one empty
/// read.
#[cfg(unix)]
pub fn read_now(fd: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Err(rustix::io::Errno::INTR) => {}
            r => return r.map_err(std::io::Error::from),
        }
    }
}

/// The core's view of an exit status.
pub fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    ExitStatus {
        code: status.code(),
        signal,
    }
}

#[cfg(test)]
mod tests {
    use super::AfterWrite;

    /// Reads after writes go on while they find the answer (but for one
    /// write in `PROBE`), stop after misses except for one probe in
    /// `PROBE` writes, and resume once a probe finds it.
    #[test]
    fn after_write_reads_while_it_pays() {
        let p = usize::from(AfterWrite::PROBE);
        let mut a = AfterWrite::default();
        let tried: Vec<bool> = (0..3 * p)
            .map(|_| {
                let t = a.try_now();
                if t {
                    a.found(true);
                }
                t
            })
            .collect();
        let skipped: Vec<usize> = (0..tried.len()).filter(|&i| !tried[i]).collect();
        assert_eq!(skipped, [p - 1, 2 * p - 1, 3 * p - 1]);
        // Two finds banked: it stops at the third miss in a row.
        for _ in 0..2 {
            assert!(a.try_now());
            a.found(false);
        }
        assert!(a.try_now());
        a.found(false);
        let tried: Vec<bool> = (0..3 * p).map(|_| a.try_now()).collect();
        let probes: Vec<usize> = (0..tried.len()).filter(|&i| tried[i]).collect();
        assert_eq!(probes, [p - 4, 2 * p - 4, 3 * p - 4]);
        // A probe that misses keeps it off; one that finds turns it on.
        a.found(false);
        for _ in 0..p - 4 {
            assert!(!a.try_now());
        }
        assert!(a.try_now());
        a.found(true);
        assert!(a.try_now());
        // Calls in flight together: no reads for the next QUIET writes.
        a.crowded();
        for _ in 0..AfterWrite::QUIET {
            assert!(!a.try_now());
        }
        assert!(a.try_now());
        a.found(true);
        // Through should_read: no read with no call in flight, nor for a
        // write not gone whole; one with several in flight is crowded.
        assert!(!a.should_read(0, true));
        assert!(!a.should_read(1, false));
        assert!(a.should_read(1, true));
        assert!(!a.should_read(2, true));
        assert!(!a.should_read(1, true));
    }
}
