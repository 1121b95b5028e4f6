//! How a stdio server's `command` becomes a process on Windows: found
//! through `PATH` × `PATHEXT`, and a batch file (`npx.cmd`, `pnpm.cmd`)
//! run through `cmd.exe` with its arguments quoted so that they arrive
//! unchanged.
//!
//! Pure functions of what they are handed (the child's `PATH` and
//! `PATHEXT`, a directory, a "file exists" lookup), so that every rule is
//! tested on any OS; [`crate::process::command`] applies them on Windows
//! only. Paths are Windows paths in `String`s: `\` and `/` both separate.
//!
//! ```text
//!  "npx" ──PATH × PATHEXT──► C:\Program Files\nodejs\npx.cmd ──► C:\Windows\System32\cmd.exe
//!                                                                 /e:ON /v:OFF /d /s /c ""C:\...\npx.cmd" -y "a&b""
//!  "uvx" ──PATH × PATHEXT──► C:\Users\me\.local\bin\uvx.exe   ──► itself, arguments quoted by std
//!  "cmd" + ["/c", "npx", ..] ──► C:\Windows\System32\cmd.exe /c npx ..  (left as the user wrote it)
//! ```
//!
//! # Why
//!
//! Hosts' configs say `"command": "npx"` (the MCP docs and most servers'
//! READMEs do), but on Windows `npx` is `npx.cmd`, a batch file.
//! `CreateProcess` appends `.exe` only, and so does Rust's
//! `std::process::Command` (rust-lang/rust#37380 was closed as "that is
//! cmd.exe's behaviour, not CreateProcess's"), so `npx` is "not found".
//! Node's `spawn` has the same gap (`spawn npx ENOENT`) and since
//! CVE-2024-27980 refuses a `.cmd` without `shell: true` (`EINVAL`), which
//! is why users of Claude Desktop and Claude Code on Windows are told to
//! write `"command": "cmd", "args": ["/c", "npx", ...]`, and why the MCP
//! TypeScript SDK's `StdioClientTransport` spawns through cross-spawn
//! (PATHEXT lookup, then `cmd.exe /d /s /c "..."` for a batch file), Claude
//! Desktop through spawn-rx (`.exe`, `.bat`, `.cmd`, `.ps1` tried in
//! turn) and the Python SDK through `shutil.which` then `.cmd`, `.bat`,
//! `.exe`, `.ps1`. Both config spellings must work here.
//!
//! # The rules
//!
//! 1. **Finding the file** ([`resolve`]). A command with a `\`, `/` or `:`
//!    is a path: absolute as is, relative from the server's `cwd` (the
//!    directory the child starts in, as cross-spawn does). Any other name
//!    is looked for in each directory of the child's `PATH` in order
//!    (its `env` entry if it sets one, else ours; entries may be quoted;
//!    empty ones are skipped), and in each directory with each extension
//!    of `PATHEXT` in order (default `.COM;.EXE;.BAT;.CMD`), so the first
//!    directory that has the command wins, as in `cmd.exe` and `where`.
//!    Extensions compare without case. A name that already ends with an
//!    extension of `PATHEXT` (or `.com`, `.exe`, `.bat`, `.cmd`) is looked
//!    for as is (`npx.cmd`, `node.exe`); any other name only with an
//!    extension added, so the POSIX `npx` shell script that npm installs
//!    beside `npx.cmd` is never picked (CreateProcess cannot run it: "not a
//!    valid Win32 application"). Only `.com`, `.exe`, `.bat` and `.cmd` are
//!    added: other `PATHEXT` entries (`.VBS`, `.JS`, `.PS1`, ...) are
//!    files `cmd.exe` hands to their file association, which a stdio
//!    server cannot be. The current directory is never searched for a
//!    bare name (`cmd.exe` and node-which look there first; Rust's std
//!    stopped in 1.58, rust-lang/rust#87704; a cloned repository could
//!    otherwise plant an `npx.cmd`). Nothing found: the command is
//!    handed to std unchanged, which also looks in the system directories
//!    and otherwise fails with `NotFound`.
//! 2. **Starting it** ([`plan`]). A `.bat` or `.cmd` runs as
//!    `%SystemRoot%\System32\cmd.exe` (as std does for a batch file; not
//!    `%ComSpec%`, which may name another shell whose parsing differs)
//!    with the command line of [`batch_command_line`], passed verbatim.
//!    Anything else (`.exe`, `.com`) is started directly by its full path
//!    with the arguments as given, which std quotes for the C runtime's
//!    parser. `cmd` itself is such an `.exe`: a config that already says
//!    `"command": "cmd", "args": ["/c", "npx", ...]` runs exactly as
//!    written, as it does under Node.
//! 3. **Quoting for cmd.exe** ([`batch_command_line`]): the rules Rust's
//!    std adopted for batch files after CVE-2024-24576 ("BatBadBut",
//!    Rust 1.77.2), plus `/s`. A batch file's arguments are parsed twice:
//!    by `cmd.exe` reading the command line, and again when the script's
//!    `%*` is pasted into a line like `"%NODE_EXE%" "%NPX_CLI_JS%" %*` and
//!    that line is parsed. `^` escapes are consumed by the first parse, so
//!    an escaped `&` would run a command in the second (cross-spawn
//!    escapes twice for shims under `node_modules\.bin` only, and not for
//!    `npx.cmd`); double quotes protect in both. So:
//!    - `/d` skips AutoRun, `/e:ON` keeps the `%` rule below working,
//!      `/v:OFF` keeps `!` literal, `/s /c "..."` strips exactly the outer
//!      pair of quotes (without `/s`, cmd.exe guesses);
//!    - the script's path is quoted (`/` made `\`; a `"` in it refused);
//!    - an argument is quoted when it is empty, ends with `\`, or has
//!      anything but letters, digits, non-ASCII non-space characters and
//!      ``#$*+-./:?@\_`` (so every one of ``&|<>()^,;= "%!` `` and spaces);
//!    - inside it a `"` is doubled, so cmd.exe's quote state flips twice
//!      and stays "inside", while the C runtime (since VS 2008; node's and
//!      python's `wmain`, Rust's args) reads `""` within quotes as one `"`;
//!      backslashes before a `"` or the closing quote are doubled;
//!    - `%` becomes `%%cd:~,%`: cmd.exe expands `%VAR%` even inside
//!      quotes, and cannot escape a `%` on a command line, but the empty
//!      substring of `%cd%` splits any `%NAME%` so that nothing expands;
//!    - CR, LF and NUL are refused ([`LaunchError`]): cmd.exe ends the
//!      command there.
//!
//! What the script does with its `%*` is its own business: npm's, pnpm's
//! and cmd-shim's shims pass it on as above.

/// The extensions a stdio server's file can have: CreateProcess starts
/// `.com` and `.exe` itself, `cmd.exe` runs `.bat` and `.cmd`.
const LAUNCHABLE: [&str; 4] = [".com", ".exe", ".bat", ".cmd"];

/// `PATHEXT` when the environment has none.
pub const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// What the rules look at: the child's environment as it will be, the
/// directory it starts in, and the file system.
pub struct Env<'a> {
    /// The child's `PATH`: its `env` entry if the server sets one, else
    /// ours (see [`child_var`]).
    pub path: Option<&'a str>,
    /// The child's `PATHEXT`, likewise.
    pub pathext: Option<&'a str>,
    /// The absolute directory a relative command is resolved from: the
    /// server's `cwd` (from our current directory), else our current
    /// directory.
    pub dir: &'a str,
    /// Our `SystemRoot` (where `System32\cmd.exe` is).
    pub system_root: Option<&'a str>,
    /// Our `ComSpec`, used for `cmd.exe` only without `SystemRoot`.
    pub comspec: Option<&'a str>,
    /// Whether a regular file exists at a path (without regard to case,
    /// as on Windows).
    pub is_file: &'a dyn Fn(&str) -> bool,
}

/// How to start a stdio server's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Start `program` (a full path when it was found) with `args`, each
    /// quoted the usual way (`std::process::Command::args`).
    Program {
        /// The program.
        program: String,
        /// Its arguments, as configured.
        args: Vec<String>,
    },
    /// Start `cmd.exe` (`program`) with `command_line` appended verbatim
    /// (`std::os::windows::process::CommandExt::raw_arg`): a batch file.
    Batch {
        /// The path of `cmd.exe`.
        program: String,
        /// Everything after `cmd.exe` on its command line.
        command_line: String,
    },
}

/// Why a batch file cannot be started with the arguments given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// An argument holds CR, LF or NUL, where cmd.exe would end the
    /// command (and run what follows as another).
    #[error("argument {index} for the batch file {script} holds a line break or NUL, which cmd.exe cannot pass on")]
    LineBreak {
        /// The batch file.
        script: String,
        /// The argument's index (0: the first after the command).
        index: usize,
    },
    /// The batch file's path holds a `"` (no Windows file name does).
    #[error("the batch file path {0} holds a double quote")]
    QuoteInPath(String),
}

impl From<LaunchError> for std::io::Error {
    fn from(e: LaunchError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

/// The value of environment variable `name` for the child: the server's
/// own entry (names compare without case, as on Windows), else `parent`'s.
pub fn child_var<'a>(
    server_env: impl IntoIterator<Item = (&'a String, &'a String)>,
    name: &str,
    parent: impl FnOnce(&str) -> Option<String>,
) -> Option<String> {
    server_env
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
        .or_else(|| parent(name))
}

/// How to start `command` with `args` under `env`: rules 1 and 2 of the
/// module docs.
pub fn plan(command: &str, args: &[String], env: &Env<'_>) -> Result<Launch, LaunchError> {
    match resolve(command, env) {
        Some(found) if is_batch(&found) => Ok(Launch::Batch {
            program: cmd_exe(env),
            command_line: batch_command_line(&found, args)?,
        }),
        Some(found) => Ok(Launch::Program {
            program: found,
            args: args.to_vec(),
        }),
        None => Ok(Launch::Program {
            program: command.to_owned(),
            args: args.to_vec(),
        }),
    }
}

/// The file `command` names (rule 1 of the module docs), or `None`.
pub fn resolve(command: &str, env: &Env<'_>) -> Option<String> {
    if command.is_empty() {
        return None;
    }
    let pathext = env.pathext.filter(|p| !p.trim().is_empty());
    let listed: Vec<String> = pathext
        .unwrap_or(DEFAULT_PATHEXT)
        .split(';')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = e.to_ascii_lowercase();
            if e.starts_with('.') {
                e
            } else {
                format!(".{e}")
            }
        })
        .collect();
    let explicit = extension(command).is_some_and(|ext| {
        let ext = ext.to_ascii_lowercase();
        listed.contains(&ext) || LAUNCHABLE.contains(&ext.as_str())
    });
    let added: Vec<&str> = listed
        .iter()
        .map(String::as_str)
        .filter(|e| LAUNCHABLE.contains(e))
        .collect();
    let find = |base: String| -> Option<String> {
        if explicit {
            return (env.is_file)(&base).then_some(base);
        }
        added
            .iter()
            .map(|ext| format!("{base}{ext}"))
            .find(|c| (env.is_file)(c))
    };
    if command.contains(['\\', '/', ':']) {
        let base = if is_absolute(command) || command.contains(':') {
            command.to_owned()
        } else {
            normalize(&join(env.dir, command))
        };
        return find(base);
    }
    env.path
        .unwrap_or_default()
        .split(';')
        .map(|d| d.trim().trim_matches('"'))
        .filter(|d| !d.is_empty())
        .find_map(|dir| find(join(dir, command)))
}

/// The `cmd.exe` that runs batch files.
pub fn cmd_exe(env: &Env<'_>) -> String {
    if let Some(root) = env.system_root.filter(|r| !r.is_empty()) {
        return join(root, r"System32\cmd.exe");
    }
    env.comspec
        .filter(|c| is_absolute(c))
        .unwrap_or("cmd.exe")
        .to_owned()
}

/// What follows `cmd.exe` on the command line that runs batch file
/// `script` with `args` (rule 3 of the module docs).
pub fn batch_command_line(script: &str, args: &[String]) -> Result<String, LaunchError> {
    if script.contains('"') {
        return Err(LaunchError::QuoteInPath(script.to_owned()));
    }
    let mut line = String::with_capacity(32 + script.len() + args.len() * 16);
    // The outer pair of quotes that `/s` strips.
    line.push_str("/e:ON /v:OFF /d /s /c \"\"");
    push_percent_safe(&mut line, &script.replace('/', "\\"));
    line.push('"');
    for (index, arg) in args.iter().enumerate() {
        if arg.contains(['\r', '\n', '\0']) {
            return Err(LaunchError::LineBreak {
                script: script.to_owned(),
                index,
            });
        }
        line.push(' ');
        push_batch_arg(&mut line, arg);
    }
    line.push('"');
    Ok(line)
}

/// Appends `arg` quoted for a batch file's command line.
fn push_batch_arg(line: &mut String, arg: &str) {
    let quote = arg.is_empty() || arg.ends_with('\\') || arg.chars().any(needs_quotes);
    if quote {
        line.push('"');
    }
    let mut backslashes = 0;
    for c in arg.chars() {
        match c {
            '\\' => {
                backslashes += 1;
                line.push('\\');
                continue;
            }
            // 2n backslashes and `""`: n backslashes and one `"` for the
            // C runtime; two flips (still inside) for cmd.exe.
            '"' => {
                line.extend(std::iter::repeat_n('\\', backslashes));
                line.push_str("\"\"");
            }
            '%' => line.push_str(PERCENT),
            c => line.push(c),
        }
        backslashes = 0;
    }
    if quote {
        // Doubled, so that they do not escape the closing quote.
        line.extend(std::iter::repeat_n('\\', backslashes));
        line.push('"');
    }
}

/// What a `%` becomes: a `%` that starts no variable (what follows it is
/// the empty substring of `%cd%`, which cmd.exe expands to nothing).
const PERCENT: &str = "%%cd:~,%";

fn push_percent_safe(line: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '%' => line.push_str(PERCENT),
            c => line.push(c),
        }
    }
}

/// Whether `c` makes an argument need quotes for cmd.exe.
fn needs_quotes(c: char) -> bool {
    const SAFE: &str = r"#$*+-./:?@\_";
    if c.is_ascii() {
        !(c.is_ascii_alphanumeric() || SAFE.contains(c))
    } else {
        c.is_control() || c.is_whitespace()
    }
}

/// Whether `path` names a batch file.
fn is_batch(path: &str) -> bool {
    extension(path)
        .is_some_and(|e| e.eq_ignore_ascii_case(".bat") || e.eq_ignore_ascii_case(".cmd"))
}

/// The extension of the last component of `path`, with its dot.
fn extension(path: &str) -> Option<&str> {
    let name = path.rsplit(['\\', '/', ':']).next().unwrap_or(path);
    let dot = name.rfind('.')?;
    (dot > 0 && dot + 1 < name.len()).then(|| &name[dot..])
}

/// Whether `path` does not depend on a current directory: `C:\x`, `C:/x`,
/// `\\server\share`, `\x` (the current drive's root).
fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    matches!(b.first(), Some(b'\\' | b'/'))
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'\\' | b'/'))
}

fn join(dir: &str, rest: &str) -> String {
    let dir = dir.trim_end_matches(['\\', '/']);
    format!("{dir}\\{rest}")
}

/// `path` with `\` only and its `.` and `..` components applied, as
/// Windows does to a path before it opens it (`C:\a\.\b\..\c` is
/// `C:\a\c`); `..` stops at the root (`C:`, `\\server\share`).
fn normalize(path: &str) -> String {
    let unc = path.starts_with(r"\\") || path.starts_with("//");
    let mut components = path.split(['\\', '/']).filter(|p| !p.is_empty());
    let mut out = match (unc, path.starts_with(['\\', '/'])) {
        (true, _) => {
            let server = components.next().unwrap_or_default();
            let share = components.next().unwrap_or_default();
            format!(r"\\{server}\{share}")
        }
        // The current drive's root.
        (false, true) => String::new(),
        (false, false) => components.next().unwrap_or_default().to_owned(),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in components {
        match part {
            "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    for part in parts {
        out.push('\\');
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests;
