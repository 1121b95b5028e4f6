//! The launch rules on any OS: a fake file system for the lookup, and for
//! the quoting a model of what cmd.exe, a batch file's `%*` and the C
//! runtime do with the command line (the documented parsing rules, not
//! cmd.exe itself: these machines run Linux).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

/// A file system of the files listed (compared without case, and with
/// `/` as `\\`, as on Windows).
struct Fs(BTreeSet<String>);

impl Fs {
    fn new(files: &[&str]) -> Fs {
        Fs(files.iter().map(|f| Fs::key(f)).collect())
    }

    fn key(path: &str) -> String {
        path.to_ascii_lowercase().replace('/', "\\")
    }

    fn has(&self, path: &str) -> bool {
        self.0.contains(&Fs::key(path))
    }
}

const PATH: &str = r"C:\Windows\System32;C:\Windows;C:\Program Files\nodejs;C:\Users\me\.local\bin";

/// A typical machine: Node (npx.cmd beside npm's POSIX `npx` script and
/// `npx.ps1`), uv (uvx.exe), cmd.exe.
fn machine() -> Fs {
    Fs::new(&[
        r"C:\Windows\System32\cmd.exe",
        r"C:\Windows\System32\where.exe",
        r"C:\Program Files\nodejs\node.exe",
        r"C:\Program Files\nodejs\npx",
        r"C:\Program Files\nodejs\npx.cmd",
        r"C:\Program Files\nodejs\npx.ps1",
        r"C:\Program Files\nodejs\npm.cmd",
        r"C:\Users\me\.local\bin\uvx.exe",
        r"C:\Users\me\project\npx.cmd",
        r"C:\Users\me\project\bin\server.bat",
        r"C:\Users\me\project\bin\tool.exe",
    ])
}

fn env<'a>(fs: &'a Fs, path: Option<&'a str>, pathext: Option<&'a str>) -> Env<'a> {
    let is_file: &'a dyn Fn(&str) -> bool = Box::leak(Box::new(move |p: &str| fs.has(p)));
    Env {
        path,
        pathext,
        dir: r"C:\Users\me\project",
        system_root: Some(r"C:\Windows"),
        comspec: Some(r"C:\Windows\system32\cmd.exe"),
        is_file,
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn program(program: &str, list: &[&str]) -> Launch {
    Launch::Program {
        program: program.into(),
        args: args(list),
    }
}

// ----- finding the file ----------------------------------------------------

#[test]
fn npx_is_found_as_npx_cmd_in_a_directory_with_spaces() {
    let fs = machine();
    let e = env(
        &fs,
        Some(PATH),
        Some(".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC"),
    );
    assert_eq!(
        resolve("npx", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
    // Not the POSIX script `npx` beside it, not `npx.ps1`, and not the
    // project's `npx.cmd` in the current directory.
    let plan = plan(
        "npx",
        &args(&["-y", "@modelcontextprotocol/server-everything"]),
        &e,
    )
    .unwrap();
    assert_eq!(
        plan,
        Launch::Batch {
            program: r"C:\Windows\System32\cmd.exe".into(),
            command_line: r#"/e:ON /v:OFF /d /s /c ""C:\Program Files\nodejs\npx.cmd" -y @modelcontextprotocol/server-everything""#.into(),
        }
    );
}

#[test]
fn uvx_exe_is_started_directly_by_its_full_path() {
    let fs = machine();
    let e = env(&fs, Some(PATH), None);
    assert_eq!(
        plan("uvx", &args(&["mcp-server-fetch"]), &e).unwrap(),
        program(r"C:\Users\me\.local\bin\uvx.exe", &["mcp-server-fetch"])
    );
}

#[test]
fn cmd_slash_c_entries_run_as_written() {
    let fs = machine();
    let e = env(&fs, Some(PATH), None);
    let a = [
        "/c",
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        r"C:\Users\me\My Documents",
    ];
    assert_eq!(
        plan("cmd", &args(&a), &e).unwrap(),
        program(r"C:\Windows\System32\cmd.exe", &a)
    );
    assert_eq!(
        plan("cmd.exe", &args(&a), &e).unwrap(),
        program(r"C:\Windows\System32\cmd.exe", &a)
    );
}

#[test]
fn directory_order_wins_over_extension_order() {
    let fs = Fs::new(&[
        r"C:\a\tool.cmd",
        r"C:\b\tool.exe",
        r"C:\b\both.exe",
        r"C:\b\both.cmd",
    ]);
    let e = env(&fs, Some(r"C:\a;C:\b"), Some(".EXE;.CMD"));
    // The first directory that has it, whatever the extension...
    assert_eq!(resolve("tool", &e).as_deref(), Some(r"C:\a\tool.cmd"));
    // ...and within a directory, PATHEXT's order.
    assert_eq!(resolve("both", &e).as_deref(), Some(r"C:\b\both.exe"));
    let e = env(&fs, Some(r"C:\a;C:\b"), Some(".CMD;.EXE"));
    assert_eq!(resolve("both", &e).as_deref(), Some(r"C:\b\both.cmd"));
}

#[test]
fn pathext_case_spacing_and_missing_dots_do_not_matter() {
    let fs = Fs::new(&[r"C:\b\tool.CMD"]);
    for pathext in [".cmd", ".CMD", " .Cmd ; .exe", "cmd", ";;.CMD;"] {
        let e = env(&fs, Some(r"C:\b"), Some(pathext));
        assert_eq!(
            resolve("tool", &e).as_deref(),
            Some(r"C:\b\tool.cmd"),
            "{pathext:?}"
        );
        assert_eq!(
            resolve("TOOL", &e).as_deref(),
            Some(r"C:\b\TOOL.cmd"),
            "{pathext:?}"
        );
    }
}

#[test]
fn without_pathext_the_default_is_used_and_an_empty_path_finds_nothing() {
    let fs = machine();
    for pathext in [None, Some(""), Some("  ")] {
        let e = env(&fs, Some(PATH), pathext);
        assert_eq!(
            resolve("npx", &e).as_deref(),
            Some(r"C:\Program Files\nodejs\npx.cmd")
        );
    }
    let e = env(&fs, None, None);
    assert_eq!(resolve("npx", &e), None);
    let e = env(&fs, Some(""), None);
    assert_eq!(resolve("npx", &e), None);
}

#[test]
fn pathext_that_leaves_out_cmd_is_obeyed() {
    let fs = machine();
    let e = env(&fs, Some(PATH), Some(".EXE"));
    assert_eq!(resolve("npx", &e), None);
    assert_eq!(
        resolve("npx.cmd", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
}

#[test]
fn extensions_nothing_can_start_are_never_added() {
    let fs = Fs::new(&[
        r"C:\b\tool.ps1",
        r"C:\b\tool.js",
        r"C:\b\tool.vbs",
        r"C:\b\tool.bat",
    ]);
    let e = env(&fs, Some(r"C:\b"), Some(".PS1;.JS;.VBS;.BAT"));
    assert_eq!(resolve("tool", &e).as_deref(), Some(r"C:\b\tool.bat"));
    let e = env(&fs, Some(r"C:\b"), Some(".PS1;.JS;.VBS"));
    assert_eq!(resolve("tool", &e), None);
    // Named with its extension, it is that file (std then says what it
    // thinks of it).
    assert_eq!(resolve("tool.ps1", &e).as_deref(), Some(r"C:\b\tool.ps1"));
    assert_eq!(
        plan("tool.ps1", &[], &e).unwrap(),
        program(r"C:\b\tool.ps1", &[])
    );
}

#[test]
fn an_explicit_extension_is_looked_for_as_is() {
    let fs = Fs::new(&[
        r"C:\b\npx.cmd",
        r"C:\b\npx.cmd.exe",
        r"C:\b\node.exe",
        r"C:\b\python3.11.exe",
    ]);
    let e = env(&fs, Some(r"C:\b"), None);
    assert_eq!(resolve("npx.cmd", &e).as_deref(), Some(r"C:\b\npx.cmd"));
    assert_eq!(resolve("NPX.CMD", &e).as_deref(), Some(r"C:\b\NPX.CMD"));
    assert_eq!(resolve("node.exe", &e).as_deref(), Some(r"C:\b\node.exe"));
    // A dot that is not an extension of PATHEXT: one is added.
    assert_eq!(
        resolve("python3.11", &e).as_deref(),
        Some(r"C:\b\python3.11.exe")
    );
    assert_eq!(resolve("nothing.exe", &e), None);
}

#[test]
fn a_full_path_with_spaces_and_no_extension_gets_one() {
    let fs = machine();
    let e = env(&fs, Some(""), None);
    assert_eq!(
        resolve(r"C:\Program Files\nodejs\npx", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
    assert_eq!(
        resolve(r"C:\Program Files\nodejs\npx.cmd", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
    // Forward slashes, as JSON configs often have them: found, and the
    // script's path given to cmd.exe with backslashes.
    let found = resolve("C:/Program Files/nodejs/npx", &e).unwrap();
    assert_eq!(found, "C:/Program Files/nodejs/npx.cmd");
    let Launch::Batch { command_line, .. } = plan("C:/Program Files/nodejs/npx", &[], &e).unwrap()
    else {
        panic!("a batch file");
    };
    assert_eq!(
        command_line,
        r#"/e:ON /v:OFF /d /s /c ""C:\Program Files\nodejs\npx.cmd"""#
    );
}

#[test]
fn a_relative_path_is_resolved_from_the_servers_directory() {
    let fs = machine();
    let e = env(&fs, Some(PATH), None);
    assert_eq!(
        resolve(r".\bin\server", &e).as_deref(),
        Some(r"C:\Users\me\project\bin\server.bat")
    );
    assert_eq!(
        resolve("bin/server", &e).as_deref(),
        Some(r"C:\Users\me\project\bin\server.bat")
    );
    assert_eq!(
        resolve(r"bin\tool", &e).as_deref(),
        Some(r"C:\Users\me\project\bin\tool.exe")
    );
    assert_eq!(
        resolve(r"..\project\bin\tool.exe", &e).as_deref(),
        Some(r"C:\Users\me\project\bin\tool.exe")
    );
    // But a bare name is never looked for there.
    let e = env(&fs, Some(r"C:\Windows"), None);
    assert_eq!(resolve("npx", &e), None);
}

#[test]
fn relative_paths_are_made_whole() {
    for (dir, rel, whole) in [
        (r"C:\a\b", r"c\d", r"C:\a\b\c\d"),
        (r"C:\a\b\", r".\c", r"C:\a\b\c"),
        (r"C:\a\b", r"..\..\..\c", r"C:\c"),
        (r"C:/a/b", "./c/../d", r"C:\a\b\d"),
        (r"\\server\share\dir", r"..\..\x", r"\\server\share\x"),
        (r"\dir", r"..\x", r"\x"),
    ] {
        assert_eq!(normalize(&join(dir, rel)), whole, "{dir} + {rel}");
    }
}

#[test]
fn quoted_and_empty_path_entries() {
    let fs = machine();
    let e = env(
        &fs,
        Some(r#";"C:\Program Files\nodejs";;C:\Windows\System32;"#),
        None,
    );
    assert_eq!(
        resolve("npx", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
    let e = env(
        &fs,
        Some(r"C:\Program Files\nodejs\;C:\Windows\System32"),
        None,
    );
    assert_eq!(
        resolve("npx", &e).as_deref(),
        Some(r"C:\Program Files\nodejs\npx.cmd")
    );
}

#[test]
fn a_command_not_found_is_left_to_std() {
    let fs = machine();
    let e = env(&fs, Some(PATH), None);
    for command in [
        "no-such-server",
        r"C:\nowhere\server",
        "missing.cmd",
        "",
        r".\nothing",
    ] {
        assert_eq!(resolve(command, &e), None, "{command:?}");
        assert_eq!(
            plan(command, &args(&["a b"]), &e).unwrap(),
            program(command, &["a b"]),
            "{command:?}"
        );
    }
}

#[test]
fn cmd_exe_is_the_system_ones() {
    let fs = machine();
    let mut e = env(&fs, Some(PATH), None);
    assert_eq!(cmd_exe(&e), r"C:\Windows\System32\cmd.exe");
    e.system_root = Some(r"D:\WINNT\");
    assert_eq!(cmd_exe(&e), r"D:\WINNT\System32\cmd.exe");
    e.system_root = None;
    assert_eq!(cmd_exe(&e), r"C:\Windows\system32\cmd.exe");
    e.comspec = Some("tcc.exe");
    assert_eq!(cmd_exe(&e), "cmd.exe");
    e.comspec = None;
    assert_eq!(cmd_exe(&e), "cmd.exe");
}

#[test]
fn the_childs_own_path_comes_first() {
    let env: std::collections::BTreeMap<String, String> = [
        ("Path".to_string(), r"C:\mine".to_string()),
        ("X".into(), "y".into()),
    ]
    .into();
    let parent = |name: &str| Some(format!("parent {name}"));
    assert_eq!(child_var(&env, "PATH", parent).as_deref(), Some(r"C:\mine"));
    assert_eq!(
        child_var(&env, "PATHEXT", parent).as_deref(),
        Some("parent PATHEXT")
    );
    assert_eq!(child_var(&env, "PATHEXT", |_| None), None);
}

// ----- quoting for cmd.exe ------------------------------------------------

fn line(list: &[&str]) -> String {
    let full = batch_command_line(r"C:\Program Files\nodejs\npx.cmd", &args(list)).unwrap();
    let head = r#"/e:ON /v:OFF /d /s /c ""C:\Program Files\nodejs\npx.cmd""#;
    let tail = full.strip_prefix(head).expect("the script first");
    tail.strip_suffix('"')
        .expect("the outer quote last")
        .to_owned()
}

#[test]
fn plain_arguments_stay_bare() {
    assert_eq!(
        line(&[
            "-y",
            "@modelcontextprotocol/server-everything",
            "--port=3000"
        ]),
        r#" -y @modelcontextprotocol/server-everything "--port=3000""#
    );
    assert_eq!(
        line(&[r"C:\Users\me\data", "a_b.c:d?*$#+@"]),
        r" C:\Users\me\data a_b.c:d?*$#+@"
    );
    assert_eq!(line(&["héllo", "日本"]), " héllo 日本");
    assert_eq!(line(&[]), "");
}

#[test]
fn spaces_metacharacters_and_empty_arguments_are_quoted() {
    assert_eq!(
        line(&[r"C:\Users\me\My Documents"]),
        r#" "C:\Users\me\My Documents""#
    );
    assert_eq!(
        line(&["a&b", "a|b", "<in>", "x^y", "(x)", "a,b;c=d", "hi!", "`x`"]),
        r#" "a&b" "a|b" "<in>" "x^y" "(x)" "a,b;c=d" "hi!" "`x`""#
    );
    assert_eq!(line(&["", "\t"]), " \"\" \"\t\"");
    assert_eq!(line(&["a\u{3000}b"]), " \"a\u{3000}b\"");
}

#[test]
fn quotes_are_doubled_and_backslashes_before_them_doubled() {
    assert_eq!(line(&[r#"say "hi""#]), r#" "say ""hi""""#);
    assert_eq!(line(&[r#"{"a":1}"#]), r#" "{""a"":1}""#);
    assert_eq!(line(&[r#"a\"b"#]), r#" "a\\""b""#);
    assert_eq!(line(&[r#"a\\b"#]), r#" a\\b"#);
    // A trailing backslash would escape the closing quote.
    assert_eq!(line(&[r"C:\dir\"]), r#" "C:\dir\\""#);
    assert_eq!(line(&[r"C:\my dir\\"]), r#" "C:\my dir\\\\""#);
}

#[test]
fn percent_signs_never_expand() {
    assert_eq!(line(&["%PATH%"]), r#" "%%cd:~,%PATH%%cd:~,%""#);
    assert_eq!(line(&["100%"]), r#" "100%%cd:~,%""#);
    // The script's own path too.
    let full = batch_command_line(r"C:\100%\x.bat", &[]).unwrap();
    assert_eq!(full, r#"/e:ON /v:OFF /d /s /c ""C:\100%%cd:~,%\x.bat"""#);
}

#[test]
fn line_breaks_and_nul_are_refused() {
    for (i, bad) in ["a\nb", "a\rb", "a\0b", "\r\n"].into_iter().enumerate() {
        let e = batch_command_line(r"C:\x.cmd", &args(&["ok", bad])).unwrap_err();
        assert_eq!(
            e,
            LaunchError::LineBreak {
                script: r"C:\x.cmd".into(),
                index: 1
            },
            "{i}"
        );
    }
    let fs = machine();
    let env = env(&fs, Some(PATH), None);
    let e = plan("npx", &args(&["a\nwhoami"]), &env).unwrap_err();
    assert!(matches!(e, LaunchError::LineBreak { index: 0, .. }), "{e}");
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    // An .exe gets them: std quotes its arguments for the C runtime.
    assert!(plan("uvx", &args(&["a\nb"]), &env).is_ok());
    assert_eq!(
        batch_command_line("C:\\a\"b.cmd", &[]).unwrap_err(),
        LaunchError::QuoteInPath("C:\\a\"b.cmd".into())
    );
}

// ----- the model: what a batch file's program receives ---------------------

/// Variables cmd.exe knows while it reads the line.
fn var(name: &str) -> Option<String> {
    match name.to_ascii_lowercase().as_str() {
        "path" => Some("EXPANDED-PATH".into()),
        "cd" => Some(r"C:\Users\me".into()),
        // `%cd:~,%`: the empty substring.
        "cd:~," => Some(String::new()),
        _ => None,
    }
}

/// cmd.exe's percent phase on a command line (not in a batch file): a
/// defined `%NAME%` is replaced; an undefined one is left, and the scan
/// goes on from its closing `%`.
fn expand_percent(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find('%') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('%') {
            Some(end) => match var(&after[..end]) {
                Some(value) => {
                    out.push_str(&value);
                    rest = &after[end + 1..];
                }
                None => {
                    out.push('%');
                    out.push_str(&after[..end]);
                    rest = &after[end..];
                }
            },
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// cmd.exe's special-character phase: panics on an operator outside
/// quotes (a command injected) and removes `^` escapes there.
fn special_phase(s: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                out.push(c);
            }
            '^' if !quoted => out.extend(chars.next()),
            '&' | '|' | '<' | '>' if !quoted => panic!("{c} outside quotes in {s:?}"),
            c => out.push(c),
        }
    }
    out
}

/// The C runtime's split of a command line's arguments (VS 2008 and
/// later: `""` inside quotes is one `"`).
fn crt_args(s: &str) -> Vec<String> {
    let c: Vec<char> = s.chars().collect();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < c.len() && (c[i] == ' ' || c[i] == '\t') {
            i += 1;
        }
        if i == c.len() {
            return args;
        }
        let mut arg = String::new();
        let mut quoted = false;
        while i < c.len() {
            let mut backslashes = 0;
            while i < c.len() && c[i] == '\\' {
                backslashes += 1;
                i += 1;
            }
            if i < c.len() && c[i] == '"' {
                arg.extend(std::iter::repeat_n('\\', backslashes / 2));
                if backslashes % 2 == 1 {
                    arg.push('"');
                    i += 1;
                } else if quoted && c.get(i + 1) == Some(&'"') {
                    arg.push('"');
                    i += 2;
                } else {
                    quoted = !quoted;
                    i += 1;
                }
                continue;
            }
            arg.extend(std::iter::repeat_n('\\', backslashes));
            if i == c.len() {
                break;
            }
            if !quoted && (c[i] == ' ' || c[i] == '\t') {
                break;
            }
            arg.push(c[i]);
            i += 1;
        }
        args.push(arg);
    }
}

/// What the program behind a shim (`"%NODE_EXE%" "%NPX_CLI_JS%" %*`)
/// receives, `cmd.exe` being started with `command_line`.
fn received(command_line: &str) -> Vec<String> {
    let body = command_line
        .strip_prefix("/e:ON /v:OFF /d /s /c ")
        .expect("switches first");
    // `/s`: the first and the last quote go.
    let body = body
        .strip_prefix('"')
        .and_then(|b| b.strip_suffix('"'))
        .expect("outer quotes");
    let line = special_phase(&expand_percent(body));
    // The script is the first token (quoted); `%*` is the rest.
    let script_end = line[1..].find('"').expect("a quoted script") + 2;
    let star = line[script_end..].trim_start_matches([' ', '\t']);
    // The shim's own line: `%*` pasted without a second percent phase,
    // then parsed again.
    let shim = format!(r#""C:\Program Files\nodejs\node.exe" "npx-cli.js" {star}"#);
    let parsed = special_phase(&shim);
    let mut args = crt_args(&parsed);
    args.drain(..2);
    args
}

#[test]
fn the_model_sees_what_was_meant() {
    let cases: &[&[&str]] = &[
        &[
            "-y",
            "@modelcontextprotocol/server-filesystem",
            r"C:\Users\me\My Documents",
        ],
        &[
            "a&calc", "x|y", "<z>", "^", "(", ")", "!PATH!", "%PATH%", "%%", "%cd%", "100%",
        ],
        &[
            r#"{"key": "value & more"}"#,
            r#"a\"b"#,
            r#"\"&calc"#,
            r"C:\dir\",
            "",
            "a b\\",
        ],
        &[
            r#"" & calc & ""#,
            r#"\\"|x"#,
            "%PATH:~0,5%",
            "%=%",
            "a%b%c%",
        ],
    ];
    for &case in cases {
        let line = batch_command_line(r"C:\Program Files\nodejs\npx.cmd", &args(case)).unwrap();
        assert_eq!(received(&line), args(case), "{line}");
    }
}

proptest! {
    /// Any arguments without a line break or NUL arrive unchanged, and
    /// nothing in them is ever an operator to cmd.exe (`special_phase`
    /// panics on one).
    #[test]
    fn any_argument_arrives_unchanged(
        list in proptest::collection::vec("[a-zA-Z0-9 \t\"\\\\%!^&|<>()=,;@:./*?é~-]{0,12}", 0..6)
    ) {
        let line = batch_command_line(r"C:\Program Files\nodejs\npx.cmd", &list).unwrap();
        prop_assert_eq!(received(&line), list);
    }
}
