//! Files that other processes read while we write them: written whole or
//! not at all (a temporary file in the same folder, synced, then renamed
//! over the old one), so that a reader never sees half a file and a writer
//! killed half-way leaves the old file as it was; the temporary file such a
//! writer leaves is removed by the next write. And [`LockFile`]: an advisory
//! lock that processes sharing a file take around a read-modify-write.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An exclusive advisory lock on a lock file (`flock(2)` on Unix,
/// `LockFileEx` on Windows, by the `fs4` crate), held until dropped. Locks
/// of other processes and of other `LockFile`s of this process exclude it;
/// the operating system releases it when its process ends, however it
/// ends (`kill -9` too), so a dead holder never blocks anyone.
///
/// Lock a sibling of the data file, never the data file itself: a file
/// replaced by [`write_atomic`] is a new file, and a lock on the old one
/// would protect nothing.
#[derive(Debug)]
pub struct LockFile {
    _file: std::fs::File,
    path: PathBuf,
}

impl LockFile {
    /// Takes the lock on `path` (created, with its folder, mode 0600),
    /// waiting while someone else holds it.
    pub fn acquire(path: &Path) -> io::Result<LockFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let file = o.open(path)?;
        // fs4's, not std's `File::lock` (Rust 1.89, past our rust-version).
        fs4::FileExt::lock(&file)?;
        Ok(LockFile {
            _file: file,
            path: path.to_owned(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes the temporary files that writers which died before renaming
/// them left in `dir`: files named `PREFIX<pid>-<n>` of a process that is
/// no longer running (never this process's own). Only on Unix, where
/// whether a process runs can be asked; elsewhere nothing is removed.
pub fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some((pid, seq)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), true) = (
            pid.parse::<u32>(),
            !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()),
        ) else {
            continue;
        };
        if pid != me && !process_runs(pid) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::debug!(
                    path = %entry.path().display(),
                    "removed the temporary file of a writer that died (pid {pid})"
                ),
                Err(e) => tracing::debug!(path = %entry.path().display(), "not removed: {e}"),
            }
        }
    }
}

/// Whether process `pid` runs (or might: anything but a clear "no such
/// process" counts as running).
fn process_runs(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return true;
        };
        !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        )
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The prefix of [`write_atomic`]'s temporary files for a file `name`.
fn temporary_prefix(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Replaces `path` with `bytes` atomically (creating its folder). With
/// `private` the file is readable by its owner only (mode 0600 on Unix).
/// The temporary files of writers of `path` that died half-way are
/// removed first.
pub fn write_atomic(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let prefix = temporary_prefix(&name);
    remove_stale_temporaries(dir, &prefix);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{prefix}{}-{seq}", std::process::id()));
    let written = write_new(&tmp, bytes, private).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates `path` (mode 0600 when `private`) and writes and syncs `bytes`.
fn write_new(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = o.open(path)?;
    #[cfg(unix)]
    if private {
        // An existing file keeps its mode on open: set it.
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("mcpwire-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("x.json");
        write_atomic(&path, b"one", true).unwrap();
        write_atomic(&path, b"two", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A dead process's pid (a child that has exited and been reaped).
    #[cfg(unix)]
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// Issue 34: a writer killed between its fsync and its rename left its
    /// temporary file (live tokens) beside the file for ever.
    #[cfg(unix)]
    #[test]
    fn the_temporary_file_of_a_dead_writer_is_removed_by_the_next_write() {
        let dir = std::env::temp_dir().join(format!("mcpwire-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.json");
        let dead = dir.join(format!(".x.json.tmp{}-3", dead_pid()));
        let alive = dir.join(format!(
            ".x.json.tmp{}-0",
            std::os::unix::process::parent_id()
        ));
        let mine = dir.join(format!(".x.json.tmp{}-99", std::process::id()));
        let other = dir.join(format!(".y.json.tmp{}-0", dead_pid()));
        for f in [&dead, &alive, &mine, &other] {
            std::fs::write(f, "secret").unwrap();
        }
        write_atomic(&path, b"new", true).unwrap();
        assert!(!dead.exists(), "a dead writer's temporary file stays");
        assert!(alive.exists() && mine.exists(), "a live writer's must stay");
        assert!(other.exists(), "another file's temporaries are not ours");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_file_excludes_other_holders_until_dropped() {
        let dir = std::env::temp_dir().join(format!("mcpwire-lockf-{}", std::process::id()));
        let path = dir.join("sub").join("x.lock");
        let held = LockFile::acquire(&path).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        let waiter = std::thread::spawn(move || {
            let l = LockFile::acquire(&p).unwrap();
            tx.send(()).unwrap();
            drop(l);
        });
        // Still waiting while held (a generous look: it must not get it).
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the lock is free once dropped");
        waiter.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
