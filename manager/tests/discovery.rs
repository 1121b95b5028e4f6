//! Discovery on temporary directories: which files, in which order, first
//! definition wins, the project switch, broken files and entries.

mod common;

use std::path::{Path, PathBuf};

use common::TempDir;
use mcpwire_manager::discovery::Format;
use mcpwire_manager::{paths, Discovery, Env, Scope};

/// A project directory and a home directory with a config dir, and the
/// environment that points at them.
struct World {
    _root: TempDir,
    project: PathBuf,
    home: PathBuf,
    env: Env,
}

impl World {
    fn new(tag: &str) -> World {
        let root = TempDir::new(tag);
        let project = root.path().join("project");
        let home = root.path().join("home");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let env = Env::from_pairs([
            ("HOME", home.to_string_lossy().into_owned()),
            ("USERPROFILE", home.to_string_lossy().into_owned()),
            (
                "XDG_CONFIG_HOME",
                home.join(".config").to_string_lossy().into_owned(),
            ),
            (
                "APPDATA",
                home.join("AppData/Roaming").to_string_lossy().into_owned(),
            ),
        ]);
        World {
            _root: root,
            project,
            home,
            env,
        }
    }

    fn discovery(&self) -> Discovery {
        Discovery::new()
            .project_dir(&self.project)
            .env(self.env.clone())
    }

    fn write(&self, path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.to_path_buf()
    }

    /// `{"<key>": {"shared": {command: tag}, "<unique>": {command: tag}}}`
    fn mcp(&self, path: PathBuf, key: &str, unique: &str) -> PathBuf {
        let tag = path.to_string_lossy().into_owned();
        let text = serde_json::json!({
            key: {"shared": {"command": tag}, unique: {"command": tag}}
        })
        .to_string();
        self.write(&path, &text)
    }

    fn claude_desktop(&self) -> PathBuf {
        paths::claude_desktop_config(&self.env).unwrap()
    }

    /// Every file of the table, each defining `shared` and its own name.
    fn populate(&self) -> Vec<(PathBuf, &'static str)> {
        let p = &self.project;
        let h = &self.home;
        let mut files = vec![
            (
                self.mcp(p.join(".mcp.json"), "mcpServers", "p_dot_mcp"),
                "p_dot_mcp",
            ),
            (self.mcp(p.join("mcp.json"), "mcpServers", "p_mcp"), "p_mcp"),
            (
                self.mcp(p.join(".cursor/mcp.json"), "mcpServers", "p_cursor"),
                "p_cursor",
            ),
            (
                self.mcp(p.join(".vscode/mcp.json"), "servers", "p_vscode"),
                "p_vscode",
            ),
            (
                self.mcp(h.join(".cursor/mcp.json"), "mcpServers", "u_cursor"),
                "u_cursor",
            ),
            (
                self.mcp(self.claude_desktop(), "mcpServers", "u_desktop"),
                "u_desktop",
            ),
        ];
        let claude = h.join(".claude.json");
        let tag = claude.to_string_lossy().into_owned();
        self.write(
            &claude,
            &serde_json::json!({
                "numStartups": 3,
                "projects": {
                    self.project.to_string_lossy(): {"mcpServers": {"u_claude_local": {"command": tag}}},
                    "/some/other/project": {"mcpServers": {"elsewhere": {"command": tag}}}
                },
                "mcpServers": {"shared": {"command": tag}, "u_claude": {"command": tag}}
            })
            .to_string(),
        );
        files.push((claude, "u_claude"));
        let codex = h.join(".codex/config.toml");
        let tag = codex.to_string_lossy().into_owned();
        self.write(
            &codex,
            &format!(
                "model = \"o4\"\n[mcp_servers.shared]\ncommand = {tag:?}\n\n[mcp_servers.u_codex]\ncommand = {tag:?}\nargs = [\"-y\"]\n"
            ),
        );
        files.push((codex, "u_codex"));
        files
    }
}

fn command_of(d: &mcpwire_manager::Discovered, name: &str) -> String {
    d.get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .config
        .as_ref()
        .unwrap()
        .command
        .clone()
        .unwrap()
}

#[test]
fn the_documented_order_first_definition_wins() {
    let w = World::new("order");
    let files = w.populate();
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);

    // Sources in the documented order.
    let sources: Vec<PathBuf> = w
        .discovery()
        .sources()
        .into_iter()
        .map(|s| s.path)
        .collect();
    let expected: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(sources, expected);

    // `shared` comes from the first file; every other file's is shadowed.
    assert_eq!(command_of(&d, "shared"), files[0].0.to_string_lossy());
    assert_eq!(d.shadowed.iter().filter(|s| s.name == "shared").count(), 7);
    for (path, unique) in &files {
        let e = d.get(unique).unwrap_or_else(|| panic!("{unique} missing"));
        assert_eq!(e.source.as_deref(), Some(path.as_path()), "{unique}");
        let scope = if unique.starts_with("p_") {
            Scope::Project
        } else {
            Scope::User
        };
        assert_eq!(e.scope, scope, "{unique}");
    }
    // Claude Code's local scope for this project, not for others.
    assert!(d.get("u_claude_local").is_some());
    assert!(d.get("elsewhere").is_none());
    assert_eq!(
        d.get("u_codex").unwrap().config.as_ref().unwrap().args,
        ["-y"]
    );
    // The winners are listed in source order.
    let order: Vec<&str> = d.servers.iter().map(|s| s.name.as_str()).collect();
    let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
    assert!(pos("p_dot_mcp") < pos("p_vscode") && pos("p_vscode") < pos("u_cursor"));
    assert!(pos("u_desktop") < pos("u_claude_local") && pos("u_claude_local") < pos("u_claude"));
    assert!(pos("u_claude") < pos("u_codex"));
}

#[test]
fn explicit_files_come_first_and_the_project_switch_skips_project_files() {
    let w = World::new("explicit");
    w.populate();
    let extra = w.mcp(w.home.join("extra.json"), "mcpServers", "x_extra");
    let d = w.discovery().file(&extra).discover();
    assert_eq!(command_of(&d, "shared"), extra.to_string_lossy());
    assert_eq!(d.get("x_extra").unwrap().scope, Scope::Explicit);

    let d = w.discovery().project_files(false).discover();
    assert!(
        d.servers.iter().all(|s| s.scope == Scope::User),
        "{:?}",
        d.servers
    );
    assert_eq!(
        command_of(&d, "shared"),
        w.home.join(".cursor/mcp.json").to_string_lossy()
    );
    assert!(w
        .discovery()
        .project_files(false)
        .sources()
        .iter()
        .all(|s| !s.path.starts_with(&w.project)));

    // Only the given files: nothing discovered.
    let d = Discovery::only_files([&extra])
        .env(w.env.clone())
        .discover();
    let names: Vec<&str> = d.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shared", "x_extra"]);

    // User files off.
    let d = w.discovery().user_files(false).discover();
    assert!(d.servers.iter().all(|s| s.scope == Scope::Project));
}

#[test]
fn broken_files_and_entries_do_not_stop_the_rest() {
    let w = World::new("broken");
    w.write(&w.project.join(".mcp.json"), "{ not json");
    w.write(&w.project.join("mcp.json"), r#"{"mcpServers": [1, 2]}"#);
    w.write(
        &w.project.join(".cursor/mcp.json"),
        r#"{"mcpServers": {
            "ok": {"command": "x"},
            "badargs": {"command": "x", "args": 5},
            "notobj": "nope",
            "off": {"command": "x", "disabled": true},
            "kept_on": {"command": "x", "disabled": true, "enabled": true}
        }}"#,
    );
    w.write(&w.home.join(".codex/config.toml"), "[mcp_servers\nbroken");
    let missing = w.home.join("missing.json");
    let d = w.discovery().file(&missing).discover();
    let bad: Vec<(&Path, &str)> = d
        .errors
        .iter()
        .map(|e| (e.path.as_path(), e.message.as_str()))
        .collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(bad[0].0 == missing && bad[0].1.contains("cannot read"));
    assert!(bad[1].1.contains("not valid JSON"), "{bad:?}");
    assert!(
        bad[2].1.contains("`mcpServers` is not an object"),
        "{bad:?}"
    );
    assert!(bad[3].1.contains("not valid TOML"), "{bad:?}");
    assert!(d.get("ok").unwrap().config.is_ok());
    let e = d.get("badargs").unwrap().config.clone().unwrap_err();
    assert!(e.contains("invalid entry") && e.contains("sequence"), "{e}");
    assert!(d.get("notobj").unwrap().config.is_err());
    assert_eq!(
        d.get("off").unwrap().config.as_ref().unwrap().enabled,
        Some(false)
    );
    assert_eq!(
        d.get("kept_on").unwrap().config.as_ref().unwrap().enabled,
        Some(true)
    );
    // Files without any server key are fine.
    w.write(&w.project.join(".vscode/mcp.json"), r#"{"inputs": []}"#);
    let d = w.discovery().discover();
    assert!(!d
        .errors
        .iter()
        .any(|e| e.path.ends_with(".vscode/mcp.json")));
}

#[test]
fn sources_have_formats_and_missing_discovered_files_are_silent() {
    let w = World::new("formats");
    let d = w.discovery();
    let sources = d.sources();
    assert_eq!(sources.len(), 8);
    assert!(sources.iter().all(|s| !s.required));
    assert_eq!(sources[6].format, Format::ClaudeCode);
    assert_eq!(sources[7].format, Format::CodexToml);
    let found = d.discover();
    assert!(found.servers.is_empty() && found.errors.is_empty());
    assert_eq!(found.searched.len(), 8);
    let toml = w.write(
        &w.home.join("servers.toml"),
        "[mcp_servers.t]\ncommand = \"x\"\n",
    );
    let d = Discovery::only_files([&toml]).discover();
    assert!(
        d.get("t").is_some(),
        "an explicit .toml file reads as Codex"
    );
}

#[test]
fn platform_paths() {
    let w = World::new("paths");
    let cache = paths::cache_dir(&Env::from_pairs([("XDG_CACHE_HOME", "/xdg/cache")]));
    assert_eq!(cache, Some(PathBuf::from("/xdg/cache/mcpwire")));
    let codex = paths::codex_config(&Env::from_pairs([("CODEX_HOME", "/c")]));
    assert_eq!(codex, Some(PathBuf::from("/c/config.toml")));
    assert_eq!(paths::home_dir(&Env::from_pairs::<&str, &str>([])), None);
    assert_eq!(
        paths::home_dir(&Env::from_pairs([("HOME", ""), ("USERPROFILE", "/u")])),
        Some(PathBuf::from("/u")),
        "an empty HOME does not count"
    );
    let desktop = paths::claude_desktop_config(&w.env).unwrap();
    assert!(desktop.ends_with("Claude/claude_desktop_config.json"));
    #[cfg(target_os = "linux")]
    {
        assert_eq!(
            desktop,
            w.home.join(".config/Claude/claude_desktop_config.json")
        );
        let home_only = Env::from_pairs([("HOME", "/h")]);
        assert_eq!(
            paths::cache_dir(&home_only),
            Some(PathBuf::from("/h/.cache/mcpwire"))
        );
        assert_eq!(
            paths::claude_desktop_config(&home_only),
            Some(PathBuf::from(
                "/h/.config/Claude/claude_desktop_config.json"
            ))
        );
    }
    #[cfg(target_os = "macos")]
    {
        assert_eq!(
            desktop,
            w.home
                .join("Library/Application Support/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            paths::cache_dir(&Env::from_pairs([("HOME", "/h")])),
            Some(PathBuf::from("/h/Library/Caches/mcpwire"))
        );
    }
}
