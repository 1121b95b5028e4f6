//! The floors of the crate docs' map are real: each top-level module
//! imports only the modules below it (doc links may point anywhere; tests
//! are not floors).

use std::path::Path;

/// Bottom first, with the floors each may import.
const FLOORS: &[(&str, &[&str])] = &[
    // The MCP surface is data at the bottom: every floor reads method
    // names and their descriptors from it.
    ("codec", &[]),
    // `codec` for the JSON writer of params.
    ("mcp", &["codec"]),
    ("exchange", &["codec"]),
    // `exchange` for the typed redirect error a request can end with.
    ("rpc", &["codec", "exchange", "mcp"]),
    ("modern", &["mcp", "rpc"]),
    ("auth", &["exchange"]),
    ("transport", &["exchange", "rpc", "codec", "mcp"]),
    ("config", &["modern"]),
    (
        "connection",
        &[
            "codec",
            "exchange",
            "rpc",
            "mcp",
            "modern",
            "auth",
            "transport",
            "config",
        ],
    ),
];

#[test]
fn each_floor_imports_only_the_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (i, (floor, allowed)) in FLOORS.iter().enumerate() {
        let below: Vec<&str> = FLOORS[..i].iter().map(|(f, _)| *f).collect();
        assert!(
            allowed.iter().all(|a| below.contains(a)),
            "{floor} may only import floors below it"
        );
        let mut files = Vec::new();
        let dir = src.join(floor);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{floor}.rs")));
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in code_lines(&text) {
                for used in crate_paths(line) {
                    if used != *floor && !allowed.contains(&used) {
                        violations.push(format!(
                            "{}:{}: {floor} uses crate::{used}",
                            file.display(),
                            n
                        ));
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// Method identity is data: outside `mcp/` (and tests) no code line names
/// an MCP method or notification in a string literal; decisions read the
/// method table (`mcp::methods::METHODS`, `notifications`,
/// `ServerRequestKind`) instead.
#[test]
fn no_method_name_is_written_outside_the_method_table() {
    use mcpwire::mcp::methods::{notifications, ServerRequestKind, METHODS};
    let mut names: Vec<&str> = METHODS.iter().map(|m| m.name).collect();
    names.extend_from_slice(notifications::ALL);
    names.extend(
        [
            ServerRequestKind::Ping,
            ServerRequestKind::ListRoots,
            ServerRequestKind::CreateMessage,
            ServerRequestKind::Elicit,
        ]
        .map(ServerRequestKind::method),
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(src.join("mcp"))) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    found.push(format!("{}:{n}: {name}", file.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "method names written outside mcp/:\n{}",
        found.join("\n")
    );
}

/// Every `.rs` file under `dir` but test files (`tests.rs`, or any file
/// of a `tests/` module directory).
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The numbered lines of code (not comments) before the file's test
/// module.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .scan(false, |in_tests, (i, l)| {
            if l.trim_start().starts_with("mod tests") {
                *in_tests = true;
            }
            Some((i + 1, l, *in_tests))
        })
        .filter(|(_, l, in_tests)| !in_tests && !l.trim_start().starts_with("//"))
        .map(|(i, l, _)| (i, l))
}

/// The top-level modules a line names as `crate::<module>`.
fn crate_paths(line: &str) -> Vec<&str> {
    line.match_indices("crate::")
        .map(|(at, _)| {
            let rest = &line[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|m| m.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .collect()
}
