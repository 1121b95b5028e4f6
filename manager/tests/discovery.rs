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
                self.mcp(p.join(".gemini/settings.json"), "mcpServers", "p_gemini"),
                "p_gemini",
            ),
            (
                self.codex(p.join(".codex/config.toml"), "p_codex"),
                "p_codex",
            ),
            (
                self.mcp(p.join(".github/mcp.json"), "mcpServers", "p_copilot"),
                "p_copilot",
            ),
            (
                self.mcp(p.join(".zed/settings.json"), "context_servers", "p_zed"),
                "p_zed",
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
        files.push((
            self.codex(h.join(".codex/config.toml"), "u_codex"),
            "u_codex",
        ));
        let e = &self.env;
        for (path, key, unique) in [
            (paths::copilot_config(e), "mcpServers", "u_copilot"),
            (paths::windsurf_config(e), "mcpServers", "u_windsurf"),
            (paths::gemini_settings(e), "mcpServers", "u_gemini"),
            (paths::zed_settings(e), "context_servers", "u_zed"),
            (paths::vscode_user_mcp(e), "servers", "u_vscode"),
            (paths::vscode_insiders_user_mcp(e), "servers", "u_insiders"),
            (paths::vscodium_user_mcp(e), "servers", "u_vscodium"),
        ] {
            files.push((self.mcp(path.unwrap(), key, unique), unique));
        }
        let goose = paths::goose_config(e).unwrap();
        let tag = goose.to_string_lossy().into_owned();
        self.write(
            &goose,
            &format!(
                "extensions:\n  shared:\n    type: stdio\n    cmd: {tag:?}\n  u_goose:\n    type: stdio\n    cmd: {tag:?}\n"
            ),
        );
        files.push((goose, "u_goose"));
        files
    }

    /// A Codex `config.toml` with `shared` and `unique`.
    fn codex(&self, path: PathBuf, unique: &str) -> PathBuf {
        let tag = path.to_string_lossy().into_owned();
        self.write(
            &path,
            &format!(
                "model = \"o4\"\n[mcp_servers.shared]\ncommand = {tag:?}\n\n[mcp_servers.{unique}]\ncommand = {tag:?}\nargs = [\"-y\"]\n"
            ),
        )
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
    assert_eq!(
        d.shadowed.iter().filter(|s| s.name == "shared").count(),
        files.len() - 1
    );
    for (path, unique) in &files {
        let e = d.get(unique).unwrap_or_else(|| panic!("{unique} missing"));
        assert_eq!(e.source.as_deref(), Some(path.as_path()), "{unique}");
        let scope = if unique.starts_with("p_") {
            Scope::Project
        } else {
            Scope::User
        };
        assert_eq!(e.scope, scope, "{unique}");
        // Project entries carry their project: the consent rule's key.
        let project = (scope == Scope::Project).then(|| w.project.canonicalize().unwrap());
        assert_eq!(e.project, project, "{unique}");
    }
    // Each file's report: present, what it contributed, what it lost.
    assert_eq!(d.files.len(), files.len());
    for (report, (path, unique)) in d.files.iter().zip(&files) {
        assert_eq!(&report.source.path, path);
        assert!(report.present && report.error.is_none(), "{report:?}");
        assert!(report.servers.iter().any(|n| n == unique), "{report:?}");
    }
    assert_eq!(d.files[0].servers, ["p_dot_mcp", "shared"]);
    assert!(d.files[1..].iter().all(|r| r.shadowed == ["shared"]));
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
    assert!(pos("p_vscode") < pos("p_gemini") && pos("p_gemini") < pos("p_codex"));
    assert!(pos("p_codex") < pos("p_copilot") && pos("p_copilot") < pos("p_zed"));
    assert!(pos("p_zed") < pos("u_cursor"));
    assert!(pos("u_codex") < pos("u_copilot") && pos("u_copilot") < pos("u_windsurf"));
    assert!(pos("u_windsurf") < pos("u_gemini") && pos("u_gemini") < pos("u_zed"));
    assert!(pos("u_zed") < pos("u_vscode") && pos("u_vscode") < pos("u_insiders"));
    assert!(pos("u_insiders") < pos("u_vscodium") && pos("u_vscodium") < pos("u_goose"));
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
    assert!(
        e.contains("invalid entry") && e.contains("`args` must be an array of strings"),
        "{e}"
    );
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
    let formats: Vec<(Scope, Format)> = sources.iter().map(|s| (s.scope, s.format)).collect();
    use Format::*;
    use Scope::{Project as P, User as U};
    assert_eq!(
        formats,
        [
            (P, McpJson),
            (P, McpJson),
            (P, McpJson),
            (P, VsCode),
            (P, Gemini),
            (P, CodexToml),
            (P, Copilot),
            (P, Zed),
            (U, McpJson),
            (U, McpJson),
            (U, ClaudeCode),
            (U, CodexToml),
            (U, Copilot),
            (U, Windsurf),
            (U, Gemini),
            (U, Zed),
            (U, VsCode),
            (U, VsCode),
            (U, VsCode),
            (U, Goose),
        ]
    );
    assert!(sources.iter().all(|s| !s.required));
    let found = d.discover();
    assert!(found.servers.is_empty() && found.errors.is_empty());
    assert_eq!(found.searched.len(), 20);
    assert!(found
        .files
        .iter()
        .all(|f| !f.present && f.servers.is_empty()));
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
    let copilot =
        paths::copilot_config(&Env::from_pairs([("COPILOT_HOME", "/cp"), ("HOME", "/h")]));
    assert_eq!(copilot, Some(PathBuf::from("/cp/mcp-config.json")));
    let copilot = paths::copilot_config(&Env::from_pairs([("HOME", "/h"), ("USERPROFILE", "/h")]));
    assert_eq!(copilot, Some(PathBuf::from("/h/.copilot/mcp-config.json")));
    // VS Code's builds share one layout, each under its own product name.
    let vscode = paths::vscode_user_mcp(&w.env).unwrap();
    let insiders = paths::vscode_insiders_user_mcp(&w.env).unwrap();
    let codium = paths::vscodium_user_mcp(&w.env).unwrap();
    let parent = vscode.parent().unwrap().parent().unwrap().parent().unwrap();
    assert_eq!(insiders, parent.join("Code - Insiders/User/mcp.json"));
    assert_eq!(codium, parent.join("VSCodium/User/mcp.json"));
    assert_eq!(
        paths::goose_secrets(&w.env).unwrap(),
        paths::goose_config(&w.env)
            .unwrap()
            .with_file_name("secrets.yaml")
    );
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
        assert_eq!(vscode, w.home.join(".config/Code/User/mcp.json"));
        assert_eq!(
            paths::vscode_insiders_user_mcp(&home_only),
            Some(PathBuf::from("/h/.config/Code - Insiders/User/mcp.json"))
        );
        assert_eq!(
            paths::vscodium_user_mcp(&home_only),
            Some(PathBuf::from("/h/.config/VSCodium/User/mcp.json"))
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
            insiders,
            w.home
                .join("Library/Application Support/Code - Insiders/User/mcp.json")
        );
        assert_eq!(
            codium,
            w.home
                .join("Library/Application Support/VSCodium/User/mcp.json")
        );
        assert_eq!(
            paths::cache_dir(&Env::from_pairs([("HOME", "/h")])),
            Some(PathBuf::from("/h/Library/Caches/mcpwire"))
        );
    }
}

fn config_of(d: &mcpwire_manager::Discovered, name: &str) -> mcpwire_manager::ServerConfig {
    d.get(name)
        .unwrap_or_else(|| panic!("no {name}: {:?}", d.servers))
        .config
        .clone()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// VS Code's `.vscode/mcp.json` as its editor writes it: comments, a
/// trailing comma, `inputs`, `type` on every server.
#[test]
fn vscode_jsonc() {
    let w = World::new("vscode");
    w.write(
        &w.project.join(".vscode/mcp.json"),
        r#"{
	// 💡 Inputs are prompted on first server start, then stored securely by VS Code.
	"inputs": [
		{
			"type": "promptString",
			"id": "perplexity-key",
			"description": "Perplexity API Key",
			"password": true
		}
	],
	"servers": {
		// https://github.com/ppl-ai/modelcontextprotocol/
		"Perplexity": {
			"type": "stdio",
			"command": "npx",
			"args": ["-y", "server-perplexity-ask"],
			"env": {
				"PERPLEXITY_API_KEY": "${input:perplexity-key}"
			},
		},
		/* remote */
		"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
	},
}
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let p = config_of(&d, "Perplexity");
    assert_eq!(p.args, ["-y", "server-perplexity-ask"]);
    assert_eq!(p.env["PERPLEXITY_API_KEY"], "${input:perplexity-key}");
    assert_eq!(
        config_of(&d, "github").url.as_deref(),
        Some("https://api.githubcopilot.com/mcp/")
    );
    let e = d.get("github").unwrap();
    assert_eq!(e.scope, Scope::Project);
    assert!(e.project.is_some());
}

/// Zed's user `settings.json`: JSONC full of other settings; servers in
/// the newer flat shape, the older `{path, args, env}` shape, a remote
/// one and an extension's.
#[test]
fn zed_settings() {
    let w = World::new("zed");
    let path = paths::zed_settings(&w.env).unwrap();
    w.write(
        &path,
        r#"// Zed settings
//
// For information on how to configure Zed, see the Zed
// documentation: https://zed.dev/docs/configuring-zed
{
  "ui_font_size": 16,
  "buffer_font_size": 15,
  "theme": {
    "mode": "system",
    "light": "One Light",
    "dark": "One Dark"
  },
  "vim_mode": false,
  "context_servers": {
    "mcp-server-github": {
      "source": "custom",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}" }
    },
    "old-style": {
      "command": {
        "path": "/usr/local/bin/old-server",
        "args": ["--stdio"],
        "env": {}
      },
      "settings": {}
    },
    "remote": {
      "url": "https://mcp.example.com/mcp",
      "headers": { "Authorization": "Bearer ${TOKEN}" }
    },
    "mcp-server-context7": {
      "source": "extension",
      "enabled": true,
      "settings": { "default_minimum_tokens": "10000" }
    },
    "off": { "command": "x", "enabled": false },
  },
  "languages": { "Rust": { "tab_size": 4 } },
}
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let gh = config_of(&d, "mcp-server-github");
    assert_eq!(gh.command.as_deref(), Some("npx"));
    assert_eq!(gh.args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(gh.env["GITHUB_PERSONAL_ACCESS_TOKEN"], "${GITHUB_TOKEN}");
    let old = config_of(&d, "old-style");
    assert_eq!(old.command.as_deref(), Some("/usr/local/bin/old-server"));
    assert_eq!(old.args, ["--stdio"]);
    let remote = config_of(&d, "remote");
    assert_eq!(remote.url.as_deref(), Some("https://mcp.example.com/mcp"));
    assert_eq!(remote.headers["Authorization"], "Bearer ${TOKEN}");
    assert!(remote.transport().is_ok());
    assert_eq!(config_of(&d, "off").enabled, Some(false));
    // The extension's server is not run, and the report says why.
    assert!(d.get("mcp-server-context7").is_none());
    let report = d.files.iter().find(|f| f.source.path == path).unwrap();
    assert_eq!(report.notes.len(), 1, "{report:?}");
    assert!(
        report.notes[0].contains("mcp-server-context7") && report.notes[0].contains("extension")
    );
    assert_eq!(d.get("remote").unwrap().scope, Scope::User);
}

/// Gemini CLI's user settings (the nested v2 layout, servers still under
/// `mcpServers`) and a project's `.gemini/settings.json`.
#[test]
fn gemini_settings() {
    let w = World::new("gemini");
    w.write(
        &w.home.join(".gemini/settings.json"),
        r#"{
  "general": { "vimMode": false },
  "ui": { "theme": "GitHub" },
  "security": { "auth": { "selectedType": "oauth-personal" } },
  "mcpServers": {
    "pythonTools": {
      "command": "python",
      "args": ["-m", "my_mcp_server", "--port", "8080"],
      "cwd": "./mcp-servers/python",
      "env": { "DATABASE_URL": "$DB_CONNECTION_STRING", "API_KEY": "${EXTERNAL_API_KEY}" },
      "timeout": 15000,
      "includeTools": ["safe_tool", "file_reader"],
      "excludeTools": ["file_reader"]
    },
    "httpServer": {
      "httpUrl": "http://localhost:3000/mcp",
      "headers": { "Authorization": "Bearer your-api-token" },
      "timeout": 5000
    },
    "sseServer": { "url": "http://localhost:8080/sse", "trust": true },
    "typed": { "type": "http", "url": "http://localhost:9/mcp" },
    "bad": { "command": "x", "includeTools": "all" }
  }
}
"#,
    );
    w.write(
        &w.project.join(".gemini/settings.json"),
        r#"{ "mcpServers": { "projectServer": { "command": "node", "args": ["tools.js"] } } }"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let py = d.get("pythonTools").unwrap();
    let c = py.config.as_ref().unwrap();
    assert_eq!(c.cwd.as_deref(), Some("./mcp-servers/python"));
    assert_eq!(c.timeout, Some(15000));
    assert_eq!(c.env["API_KEY"], "${EXTERNAL_API_KEY}");
    assert_eq!(c.env["DATABASE_URL"], "${DB_CONNECTION_STRING}");
    assert!(py.tools.allows("safe_tool"));
    assert!(!py.tools.allows("file_reader"), "exclude wins");
    assert!(!py.tools.allows("other"));
    let http = config_of(&d, "httpServer");
    assert_eq!(http.kind.as_deref(), Some("http"));
    assert_eq!(http.url.as_deref(), Some("http://localhost:3000/mcp"));
    assert_eq!(
        http.transport(),
        Ok(mcpwire::config::TransportKind::StreamableHttp)
    );
    assert_eq!(
        config_of(&d, "sseServer").transport(),
        Ok(mcpwire::config::TransportKind::LegacySse)
    );
    assert_eq!(config_of(&d, "typed").kind.as_deref(), Some("http"));
    let bad = d.get("bad").unwrap().config.clone().unwrap_err();
    assert!(
        bad.contains("`includeTools` must be an array of strings"),
        "{bad}"
    );
    let project = d.get("projectServer").unwrap();
    assert_eq!(project.scope, Scope::Project);
    assert_eq!(
        project.project.as_deref(),
        Some(w.project.canonicalize().unwrap().as_path())
    );
}

/// GitHub Copilot CLI's `~/.copilot/mcp-config.json` as `/mcp add`
/// writes it.
#[test]
fn copilot_cli() {
    let w = World::new("copilot");
    w.write(
        &w.home.join(".copilot/mcp-config.json"),
        r#"{
  "mcpServers": {
    "playwright": {
      "type": "local",
      "command": "npx",
      "args": ["@playwright/mcp@latest"],
      "env": {},
      "tools": ["*"]
    },
    "context7": {
      "type": "http",
      "url": "https://mcp.context7.com/mcp",
      "headers": { "CONTEXT7_API_KEY": "YOUR-API-KEY" },
      "tools": ["resolve-library-id", "get-library-docs"]
    },
    "legacy": { "type": "sse", "url": "https://h/sse", "tools": [] }
  }
}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let pw = d.get("playwright").unwrap();
    let c = pw.config.as_ref().unwrap();
    assert_eq!(c.kind.as_deref(), Some("stdio"));
    assert_eq!(c.transport(), Ok(mcpwire::config::TransportKind::Stdio));
    assert!(pw.tools.is_all(), "[\"*\"] is every tool");
    let c7 = d.get("context7").unwrap();
    assert!(c7.tools.allows("get-library-docs") && !c7.tools.allows("other"));
    assert_eq!(
        c7.config.as_ref().unwrap().headers["CONTEXT7_API_KEY"],
        "YOUR-API-KEY"
    );
    let legacy = d.get("legacy").unwrap();
    assert!(!legacy.tools.allows("anything"), "an empty list is no tool");
    assert_eq!(legacy.scope, Scope::User);
}

/// Windsurf's `~/.codeium/windsurf/mcp_config.json`: remote servers as
/// `serverUrl`, tools turned off in its UI as `disabledTools`.
#[test]
fn windsurf() {
    let w = World::new("windsurf");
    w.write(
        &w.home.join(".codeium/windsurf/mcp_config.json"),
        r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_PERSONAL_ACCESS_TOKEN>" },
      "disabledTools": ["create_repository"]
    },
    "figma": {
      "serverUrl": "https://mcp.figma.com/sse",
      "headers": { "Authorization": "Bearer ${env:FIGMA_TOKEN}" }
    },
    "off": { "command": "x", "disabled": true }
  }
}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let gh = d.get("github").unwrap();
    assert!(!gh.tools.allows("create_repository") && gh.tools.allows("get_issue"));
    let figma = config_of(&d, "figma");
    assert_eq!(figma.url.as_deref(), Some("https://mcp.figma.com/sse"));
    assert!(figma.transport().is_ok());
    assert_eq!(config_of(&d, "off").enabled, Some(false));
}

/// A trusted project's `.codex/config.toml`: project scope, with the tool
/// lists and the startup timeout.
#[test]
fn codex_project() {
    let w = World::new("codexproj");
    w.write(
        &w.project.join(".codex/config.toml"),
        r#"# Project-scoped Codex settings
[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-server-docs"]
cwd = "tools"
env_vars = ["DOCS_TOKEN"]
startup_timeout_sec = 20
tool_timeout_sec = 60
enabled_tools = ["search", "open"]
disabled_tools = ["open"]

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"
http_headers = { "X-Figma-Region" = "us-east-1" }
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let docs = d.get("docs").unwrap();
    assert_eq!(docs.scope, Scope::Project);
    assert!(docs.project.is_some());
    assert_eq!(
        docs.startup_timeout,
        Some(std::time::Duration::from_secs(20))
    );
    let c = docs.config.as_ref().unwrap();
    assert_eq!(c.cwd.as_deref(), Some("tools"));
    assert_eq!(c.timeout, Some(60_000));
    assert!(docs.tools.allows("search") && !docs.tools.allows("open"));
    let figma = config_of(&d, "figma");
    assert_eq!(
        figma.headers["Authorization"],
        "Bearer ${FIGMA_OAUTH_TOKEN}"
    );
    // Off for an untrusted checkout.
    let d = w.discovery().project_files(false).discover();
    assert!(d.get("docs").is_none());
}

/// Errors name the file and the field; JSONC is accepted in Claude's and
/// Cursor's files too.
#[test]
fn errors_name_file_and_field_and_jsonc_everywhere() {
    let w = World::new("fields");
    w.write(
        &w.project.join(".cursor/mcp.json"),
        "{\n  // Cursor\n  \"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": 1}},},\n}",
    );
    let desktop = w.claude_desktop();
    w.write(
        &desktop,
        "{\"mcpServers\": {\"b\": {\"command\": \"y\",}}, /* c */}",
    );
    let zed = paths::zed_settings(&w.env).unwrap();
    w.write(&zed, "{\"context_servers\": {\"z\": {\"command\": 3}}}");
    let gemini = w.home.join(".gemini/settings.json");
    w.write(&gemini, "{ /* unterminated");
    let d = w.discovery().discover();
    let a = d.get("a").unwrap();
    assert!(a.origin().ends_with(".cursor/mcp.json"));
    assert!(a
        .config
        .clone()
        .unwrap_err()
        .contains("`env.K` must be a string"));
    assert_eq!(config_of(&d, "b").command.as_deref(), Some("y"));
    let z = d.get("z").unwrap().config.clone().unwrap_err();
    assert!(
        z.contains("`command` must be a string or {path, args, env}"),
        "{z}"
    );
    assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
    assert_eq!(d.errors[0].path, gemini);
    assert!(d.errors[0].to_string().contains("unterminated /* comment"));
    let report = d.files.iter().find(|f| f.source.path == gemini).unwrap();
    assert!(report.present && report.error.is_some());
}

/// VS Code's variables, `envFile` and `inputs`, in the project's and the
/// user profile's `mcp.json`.
#[test]
fn vscode_variables_env_file_and_inputs() {
    let w = World::new("vscodevars");
    w.write(
        &w.project.join(".env"),
        "# secrets\nAPI_BASE=https://api.example.com\nexport REGION='eu ${lit}'\nDEBUG=0\n",
    );
    w.write(
        &w.project.join(".vscode/mcp.json"),
        r#"{
	"inputs": [
		{"type": "promptString", "id": "api-key", "description": "API Key", "password": true},
		{"type": "promptString", "id": "user", "description": "User name", "default": "ada"},
		{"type": "pickString", "id": "flavour", "description": "Pick", "options": ["a", "b"]}
	],
	"servers": {
		"local": {
			"type": "stdio",
			"command": "${workspaceFolder}/bin/server",
			"args": ["--root", "${workspaceFolder}", "--cache", "${userHome}${/}.cache"],
			"env": {"API_KEY": "${input:api-key}", "USER_NAME": "${input:user}", "TOKEN": "${env:MY_TOKEN}", "DEBUG": "1"},
			"envFile": "${workspaceFolder}/.env"
		},
		"relative": {"command": "x", "envFile": ".env"},
		"missing": {"command": "x", "envFile": "nope.env"},
		"picky": {"command": "x", "args": ["${input:flavour}"]},
		"undeclared": {"command": "x", "args": ["${input:ghost}"]},
		"cmdvar": {"command": "x", "args": ["${command:pickProcess}"]},
	},
}"#,
    );
    let user = paths::vscode_user_mcp(&w.env).unwrap();
    w.write(
        &user,
        r#"{"servers": {"profile": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${input:tok}"}}},
            "inputs": [{"type": "promptString", "id": "tok", "password": true}]}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let ws = w.project.canonicalize().unwrap();
    let ws = ws.to_string_lossy();
    let local = d.get("local").unwrap();
    let c = local.config.as_ref().unwrap();
    assert_eq!(
        c.command.as_deref(),
        Some(format!("{ws}/bin/server").as_str())
    );
    let cache = format!("{}{}.cache", w.home.display(), std::path::MAIN_SEPARATOR);
    assert_eq!(c.args, ["--root", &*ws, "--cache", &cache]);
    assert_eq!(c.env["API_KEY"], "${input:api-key}");
    assert_eq!(c.env["TOKEN"], "${MY_TOKEN:-}");
    assert_eq!(c.env["DEBUG"], "1", "env wins over envFile");
    assert_eq!(c.env["API_BASE"], "https://api.example.com");
    assert_eq!(c.env["REGION"], "eu $${lit}", "envFile values are literal");
    let ids: Vec<(&str, bool, Option<&str>)> = local
        .inputs
        .iter()
        .map(|i| (i.id.as_str(), i.password, i.default.as_deref()))
        .collect();
    assert_eq!(ids, [("api-key", true, None), ("user", false, Some("ada"))]);
    assert_eq!(config_of(&d, "relative").env["DEBUG"], "0");
    let err = |n: &str| d.get(n).unwrap().config.clone().unwrap_err();
    assert!(err("missing").contains("`envFile`") && err("missing").contains("nope.env"));
    let picky = d.get("picky").unwrap();
    assert_eq!(picky.inputs[0].id, "flavour");
    let values: Vec<&str> = picky.inputs[0]
        .options
        .iter()
        .map(|o| o.value.as_str())
        .collect();
    assert_eq!(values, ["a", "b"]);
    assert!(err("undeclared").contains("no input `ghost`"));
    assert!(
        err("cmdvar").contains("`args[0]`") && err("cmdvar").contains("${command:pickProcess}")
    );
    let profile = d.get("profile").unwrap();
    assert_eq!(profile.scope, Scope::User);
    assert_eq!(profile.inputs[0].id, "tok");
}

/// Goose's `config.yaml` as `goose configure` writes it: built-in
/// extensions next to command-line and remote ones.
#[test]
fn goose_config_yaml() {
    let w = World::new("goose");
    let path = paths::goose_config(&w.env).unwrap();
    w.write(
        &paths::goose_secrets(&w.env).unwrap(),
        "GITHUB_PERSONAL_ACCESS_TOKEN: ghp_test\n",
    );
    w.write(
        &path,
        r#"GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4
GOOSE_MODE: smart_approve
extensions:
  developer:
    available_tools: []
    bundled: true
    display_name: Developer
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  github:
    args:
    - -y
    - '@modelcontextprotocol/server-github'
    available_tools: []
    bundled: null
    cmd: npx
    description: GitHub repositories, issues and pull requests
    enabled: true
    env_keys:
    - GITHUB_PERSONAL_ACCESS_TOKEN
    envs:
      GITHUB_API_URL: https://api.github.com
    name: github
    timeout: 300
    type: stdio
  remote-sse:
    enabled: false
    envs: {}
    name: remote-sse
    timeout: 60
    type: sse
    uri: http://localhost:8000/sse
  context7:
    available_tools:
    - resolve-library-id
    enabled: true
    headers:
      Authorization: Bearer ${CONTEXT7_TOKEN}
    name: context7
    timeout: 2.5
    type: streamable_http
    uri: https://mcp.context7.com/mcp
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let gh = d.get("github").unwrap();
    let c = gh.config.as_ref().unwrap();
    assert_eq!(c.command.as_deref(), Some("npx"));
    assert_eq!(c.args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(c.env["GITHUB_API_URL"], "https://api.github.com");
    assert_eq!(c.timeout, Some(300_000));
    assert!(gh.tools.is_all(), "an empty available_tools is every tool");
    let sse = config_of(&d, "remote-sse");
    assert_eq!(
        sse.transport(),
        Ok(mcpwire::config::TransportKind::LegacySse)
    );
    assert_eq!(sse.enabled, Some(false));
    let c7 = d.get("context7").unwrap();
    let c = c7.config.as_ref().unwrap();
    assert_eq!(
        c.transport(),
        Ok(mcpwire::config::TransportKind::StreamableHttp)
    );
    assert_eq!(c.headers["Authorization"], "Bearer ${CONTEXT7_TOKEN}");
    assert_eq!(c.timeout, Some(2500));
    assert!(c7.tools.allows("resolve-library-id") && !c7.tools.allows("get-library-docs"));
    assert!(d.get("developer").is_none());
    let report = d.files.iter().find(|f| f.source.path == path).unwrap();
    assert_eq!(report.notes.len(), 1, "{report:?}");
    assert!(
        report.notes[0].contains("`extensions.developer`") && report.notes[0].contains("builtin")
    );
}

/// VS Code's other inputs and variables: `pickString` (strings and
/// `{label, value}`), `command` (fails only its server), `${config:NAME}`
/// from the workspace's then the profile's `settings.json`, and variables
/// mcpwire cannot give a value, each an error naming its field.
#[test]
fn vscode_pick_command_config_and_unknown_variables() {
    let w = World::new("vscodemore");
    w.write(
        &w.project.join(".vscode/settings.json"),
        r#"{
	// workspace settings
	"mcp.port": 8080,
	"python.defaultInterpreterPath": "${workspaceFolder}/.venv/bin/python",
}"#,
    );
    let user_settings = paths::vscode_user_mcp(&w.env)
        .unwrap()
        .with_file_name("settings.json");
    w.write(
        &user_settings,
        r#"{"python.defaultInterpreterPath": "/usr/bin/python3", "mcp": {"logLevel": "debug"}, "telemetry.on": false, "editor.rulers": [80]}"#,
    );
    w.write(
        &w.project.join(".vscode/mcp.json"),
        r#"{
	"inputs": [
		{"type": "pickString", "id": "region", "description": "Region", "options": ["eu-west-1", {"label": "US East", "value": "us-east-1"}], "default": "us-east-1"},
		{"type": "command", "id": "token-cmd", "command": "shellCommand.execute", "args": {"command": "cat ~/.token"}},
		{"type": "pickString", "id": "badpick", "options": ["a"], "default": "z"},
		{"type": "pickString", "id": "nooptions", "options": []}
	],
	"servers": {
		"pick": {"command": "srv", "args": ["--region", "${input:region}"]},
		"cmd": {"command": "srv", "env": {"TOKEN": "${input:token-cmd}"}},
		"cfg": {"command": "srv", "args": ["--port=${config:mcp.port}", "${config:python.defaultInterpreterPath}", "${config:mcp.logLevel}", "${config:telemetry.on}"]},
		"cfgmissing": {"command": "srv", "args": ["${config:nope.key}"]},
		"cfglist": {"command": "srv", "args": ["${config:editor.rulers}"]},
		"unknownvar": {"command": "srv", "env": {"X": "${HOME}/x"}},
		"editor": {"command": "srv", "cwd": "${fileDirname}"},
		"badpick": {"command": "srv", "args": ["${input:badpick}"]},
		"nooptions": {"command": "srv", "args": ["${input:nooptions}"]},
		"fine": {"command": "srv", "args": ["ok"]}
	}
}"#,
    );
    // The profile's `${config:}` reads the settings.json next to it.
    let insiders = paths::vscode_insiders_user_mcp(&w.env).unwrap();
    w.write(
        &insiders.with_file_name("settings.json"),
        r#"{"mcp.url": "https://insiders.example/mcp"}"#,
    );
    w.write(
        &insiders,
        r#"{"servers": {"insiders": {"type": "http", "url": "${config:mcp.url}"}}}"#,
    );
    // No settings.json next to VSCodium's profile file.
    let codium = paths::vscodium_user_mcp(&w.env).unwrap();
    w.write(
        &codium,
        r#"{"servers": {"codium": {"command": "x", "args": ["${config:a.b}"]}, "codium_ok": {"command": "y"}}}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let err = |n: &str| {
        d.get(n)
            .unwrap_or_else(|| panic!("no {n}"))
            .config
            .clone()
            .unwrap_err()
    };

    let pick = d.get("pick").unwrap();
    let region = &pick.inputs[0];
    assert_eq!(region.id, "region");
    assert_eq!(region.default.as_deref(), Some("us-east-1"));
    let shown: Vec<(&str, &str)> = region
        .options
        .iter()
        .map(|o| (o.shown(), o.value.as_str()))
        .collect();
    assert_eq!(
        shown,
        [("eu-west-1", "eu-west-1"), ("US East", "us-east-1")]
    );
    assert_eq!(
        pick.config.as_ref().unwrap().args,
        ["--region", "${input:region}"]
    );

    let e = err("cmd");
    assert!(
        e.contains("input `token-cmd`") && e.contains("shellCommand.execute"),
        "{e}"
    );
    assert!(e.contains("cannot run outside VS Code"), "{e}");
    assert!(
        d.get("fine").unwrap().config.is_ok(),
        "only its server fails"
    );

    // The workspace's setting wins over the profile's; nested objects and
    // non-string scalars are read; a `${` in a value stays literal.
    let cfg = config_of(&d, "cfg");
    assert_eq!(
        cfg.args,
        [
            "--port=8080",
            "$${workspaceFolder}/.venv/bin/python",
            "debug",
            "false"
        ]
    );
    let e = err("cfgmissing");
    assert!(
        e.contains("`args[0]`")
            && e.contains("`nope.key` is not set in")
            && e.contains(&user_settings.display().to_string()),
        "{e}"
    );
    let e = err("cfglist");
    assert!(
        e.contains("`args[0]`") && e.contains("not a string, number or boolean"),
        "{e}"
    );
    let e = err("unknownvar");
    assert!(
        e.contains("`env.X`") && e.contains("`${HOME}` is not a VS Code variable"),
        "{e}"
    );
    let e = err("editor");
    assert!(
        e.contains("`cwd`") && e.contains("`${fileDirname}`") && e.contains("editor state"),
        "{e}"
    );
    let e = err("badpick");
    assert!(
        e.contains("`inputs[2].default` \"z\" is not one of its options"),
        "{e}"
    );
    let e = err("nooptions");
    assert!(
        e.contains("`inputs[3].options` must be a non-empty array"),
        "{e}"
    );

    let ins = d.get("insiders").unwrap();
    assert_eq!(ins.source.as_deref(), Some(insiders.as_path()));
    assert_eq!(ins.scope, Scope::User);
    assert_eq!(
        ins.config.as_ref().unwrap().url.as_deref(),
        Some("https://insiders.example/mcp")
    );
    let e = err("codium");
    assert!(
        e.contains("`${config:a.b}` but there is no VS Code settings.json")
            && e.contains(&codium.with_file_name("settings.json").display().to_string()),
        "{e}"
    );
    assert!(d.get("codium_ok").unwrap().config.is_ok());
}

/// `${config:NAME}` as VS Code resolves it (the merged configuration of
/// the workspace folder: its `.vscode/settings.json` over the user's):
/// in a workspace's `.vscode/mcp.json`, the workspace's settings, then the
/// user settings of VS Code, VS Code Insiders and VSCodium in that order
/// (the workspace may be opened in any of them); in a build's user-profile
/// `mcp.json`, that build's own `settings.json` only.
#[test]
fn vscode_config_variables_in_every_build() {
    let w = World::new("vscodebuilds");
    let settings = |mcp: Option<PathBuf>| mcp.unwrap().with_file_name("settings.json");
    let code = settings(paths::vscode_user_mcp(&w.env));
    let insiders = settings(paths::vscode_insiders_user_mcp(&w.env));
    let codium = settings(paths::vscodium_user_mcp(&w.env));
    // As each editor writes its user settings.
    w.write(
        &code,
        "{\n    \"workbench.colorTheme\": \"Default Dark Modern\",\n    \"mcp.registry\": \"https://code.example/mcp\",\n    \"mcp.region\": \"eu\"\n}",
    );
    w.write(
        &insiders,
        "{\n    \"mcp.registry\": \"https://insiders.example/mcp\",\n    \"mcp.token.file\": \"/home/ada/.insiders-token\"\n}",
    );
    w.write(
        &codium,
        "{\n    \"mcp\": {\"port\": 7007},\n    \"mcp.token.file\": \"/home/ada/.codium-token\",\n}",
    );
    w.write(
        &w.project.join(".vscode/settings.json"),
        "{\n\t\"mcp.region\": \"us\"\n}",
    );
    w.write(
        &w.project.join(".vscode/mcp.json"),
        r#"{
	"servers": {
		"ws": {
			"type": "stdio",
			"command": "srv",
			"args": ["--registry=${config:mcp.registry}", "--region=${config:mcp.region}", "--token-file=${config:mcp.token.file}", "--port=${config:mcp.port}"]
		},
		"ws-missing": {"type": "stdio", "command": "srv", "args": ["${config:mcp.nowhere}"]}
	}
}"#,
    );
    // Each build's own profile reads its own settings.
    w.write(
        &paths::vscode_insiders_user_mcp(&w.env).unwrap(),
        r#"{"servers": {"ins": {"type": "stdio", "command": "srv", "args": ["${config:mcp.registry}"]}, "ins-region": {"type": "stdio", "command": "srv", "args": ["${config:mcp.region}"]}}}"#,
    );
    w.write(
        &paths::vscodium_user_mcp(&w.env).unwrap(),
        r#"{"servers": {"cod": {"type": "stdio", "command": "srv", "args": ["${config:mcp.port}", "${config:mcp.token.file}"]}}}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);

    assert_eq!(
        config_of(&d, "ws").args,
        [
            "--registry=https://code.example/mcp",
            "--region=us",
            "--token-file=/home/ada/.insiders-token",
            "--port=7007",
        ],
        "the workspace's, then VS Code's, Insiders' and VSCodium's user settings"
    );
    let e = d.get("ws-missing").unwrap().config.clone().unwrap_err();
    for file in [&code, &insiders, &codium] {
        assert!(e.contains(&file.display().to_string()), "{e}");
    }

    assert_eq!(
        config_of(&d, "ins").args,
        ["https://insiders.example/mcp"],
        "Insiders' profile reads Insiders' settings"
    );
    let e = d.get("ins-region").unwrap().config.clone().unwrap_err();
    assert!(
        e.contains("`mcp.region` is not set in") && e.contains(&insiders.display().to_string()),
        "not VS Code's nor the workspace's: {e}"
    );
    assert_eq!(
        config_of(&d, "cod").args,
        ["7007", "/home/ada/.codium-token"]
    );
}

/// Zed's project settings, `.zed/settings.json`: its `context_servers`
/// are the project's, so they need the user's approval, and the project
/// switch leaves them out.
#[test]
fn zed_project_settings() {
    let w = World::new("zedproj");
    let path = w.write(
        &w.project.join(".zed/settings.json"),
        r#"// Folder-specific settings
//
// For a full list of overridable settings, and general information on folder-specific settings,
// see the documentation: https://zed.dev/docs/configuring-zed#settings-files
{
  "tab_size": 2,
  "context_servers": {
    "project-db": {
      "command": "npx",
      "args": ["-y", "@example/db-mcp", "--db", "./dev.sqlite"],
      "env": {}
    },
    "from-extension": { "source": "extension", "settings": {} }
  }
}
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let e = d.get("project-db").unwrap();
    assert_eq!(e.scope, Scope::Project);
    assert_eq!(e.source.as_deref(), Some(path.as_path()));
    assert_eq!(
        e.project.as_deref(),
        Some(w.project.canonicalize().unwrap().as_path())
    );
    assert!(mcpwire_manager::consent::needs_consent(e));
    assert_eq!(
        e.config.as_ref().unwrap().args,
        ["-y", "@example/db-mcp", "--db", "./dev.sqlite"]
    );
    assert!(d.get("from-extension").is_none());
    let report = d.files.iter().find(|f| f.source.path == path).unwrap();
    assert_eq!(report.source.format, Format::Zed);
    assert_eq!(report.notes.len(), 1, "{report:?}");
    let d = w.discovery().project_files(false).discover();
    assert!(d.get("project-db").is_none());
}

/// GitHub Copilot CLI's project file `.github/mcp.json` (Copilot's fields,
/// project scope) and its user file under `$COPILOT_HOME`.
#[test]
fn copilot_project_file_and_copilot_home() {
    let w = World::new("copilotproj");
    let path = w.write(
        &w.project.join(".github/mcp.json"),
        r#"{
  "mcpServers": {
    "repo-tools": {
      "type": "local",
      "command": "node",
      "args": ["scripts/mcp.js"],
      "tools": ["lint", "test"]
    }
  }
}"#,
    );
    let copilot_home = w.home.join("copilot-home");
    w.write(
        &copilot_home.join("mcp-config.json"),
        r#"{"mcpServers": {"relocated": {"type": "http", "url": "https://h/mcp", "tools": ["*"]}}}"#,
    );
    w.write(
        &w.home.join(".copilot/mcp-config.json"),
        r#"{"mcpServers": {"default-dir": {"command": "x"}}}"#,
    );
    let home = w.home.to_string_lossy().into_owned();
    let ch = copilot_home.to_string_lossy().into_owned();
    let env = Env::from_pairs([
        ("HOME", home.clone()),
        ("USERPROFILE", home),
        ("COPILOT_HOME", ch),
    ]);
    let d = w.discovery().env(env).discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let e = d.get("repo-tools").unwrap();
    assert_eq!(e.scope, Scope::Project);
    assert_eq!(e.source.as_deref(), Some(path.as_path()));
    assert_eq!(e.config.as_ref().unwrap().kind.as_deref(), Some("stdio"));
    assert!(e.tools.allows("lint") && !e.tools.allows("deploy"));
    assert!(mcpwire_manager::consent::needs_consent(e));
    assert!(d.get("relocated").is_some(), "$COPILOT_HOME is read");
    assert!(
        d.get("default-dir").is_none(),
        "~/.copilot is not read when $COPILOT_HOME is set"
    );
    // Without COPILOT_HOME, ~/.copilot.
    let d = w.discovery().discover();
    assert!(d.get("default-dir").is_some() && d.get("relocated").is_none());
}

/// GitHub Copilot CLI walks from the working directory up to the Git
/// root (the first directory holding a `.git` directory or file), reading
/// `.mcp.json` and `.github/mcp.json` at each level; a nearer file wins,
/// and at one level `.mcp.json` comes first. Parents' files are Copilot's
/// only (read as Copilot's format), project scope, and left out with the
/// project switch. Nothing above the Git root is read, and outside a
/// repository no parent is.
#[test]
fn copilot_walks_up_to_the_git_root() {
    let w = World::new("copilotwalk");
    // <root>/outer/repo (the Git root) / services / api (the project).
    let outer = w.project.join("outer");
    let repo = outer.join("repo");
    let services = repo.join("services");
    let project = services.join("api");
    std::fs::create_dir_all(repo.join(".git/objects")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(&project).unwrap();
    // As Copilot's `/mcp add` and the docs write them.
    let root_dot = w.write(
        &repo.join(".mcp.json"),
        r#"{
  "mcpServers": {
    "playwright": {
      "type": "local",
      "command": "npx",
      "args": ["@playwright/mcp@latest"],
      "tools": ["*"]
    },
    "shared": {"type": "local", "command": "from-root-dot", "args": [], "tools": ["*"]},
    "level": {"type": "local", "command": "root-dot", "args": [], "tools": ["*"]}
  }
}"#,
    );
    let root_github = w.write(
        &repo.join(".github/mcp.json"),
        r#"{
  "mcpServers": {
    "repo-lint": {"type": "stdio", "command": "node", "args": ["tools/lint-mcp.js"], "tools": ["lint"]},
    "level": {"type": "local", "command": "root-github", "args": [], "tools": ["*"]}
  }
}"#,
    );
    let services_dot = w.write(
        &services.join(".mcp.json"),
        r#"{"mcpServers": {"shared": {"type": "local", "command": "from-services", "args": [], "tools": ["*"]}}}"#,
    );
    // Above the Git root: never read.
    w.write(
        &outer.join(".mcp.json"),
        r#"{"mcpServers": {"above-root": {"command": "nope"}}}"#,
    );

    let discovery = || Discovery::new().project_dir(&project).env(w.env.clone());
    let canon = |p: &Path| p.canonicalize().unwrap();
    let d = discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let from = |n: &str| d.get(n).unwrap_or_else(|| panic!("no {n}")).clone();

    let pw = from("playwright");
    assert_eq!(pw.source, Some(canon(&root_dot)));
    assert_eq!(pw.scope, Scope::Project);
    assert_eq!(
        pw.project.as_deref(),
        Some(canon(&project).as_path()),
        "approvals are kept for the directory mcpwire runs in"
    );
    assert!(mcpwire_manager::consent::needs_consent(&pw));
    assert_eq!(
        pw.config.as_ref().unwrap().kind.as_deref(),
        Some("stdio"),
        "read as Copilot's format"
    );
    let lint = from("repo-lint");
    assert_eq!(lint.source, Some(canon(&root_github)));
    assert!(lint.tools.allows("lint") && !lint.tools.allows("fix"));
    assert_eq!(
        from("shared").source,
        Some(canon(&services_dot)),
        "the nearer file wins"
    );
    assert_eq!(
        command_of(&d, "level"),
        "root-dot",
        "at one level `.mcp.json` comes before `.github/mcp.json`"
    );
    assert!(d.get("above-root").is_none(), "nothing above the Git root");

    // The files looked at: the project's own, then each parent, nearest
    // first, before the user's.
    let sources = discovery().sources();
    let pos = |p: &Path| {
        sources
            .iter()
            .position(|s| s.path == p)
            .unwrap_or_else(|| panic!("{} not searched", p.display()))
    };
    let zed = pos(&canon(&project).join(".zed/settings.json"));
    let services_github = canon(&services).join(".github/mcp.json");
    assert_eq!(pos(&canon(&services).join(".mcp.json")), zed + 1);
    assert_eq!(pos(&services_github), zed + 2);
    assert_eq!(pos(&canon(&repo).join(".mcp.json")), zed + 3);
    assert_eq!(pos(&canon(&repo).join(".github/mcp.json")), zed + 4);
    let parent = &sources[zed + 1];
    assert_eq!(
        (parent.scope, parent.format),
        (Scope::Project, Format::Copilot)
    );
    assert_eq!(sources[zed + 5].scope, Scope::User);
    assert!(!sources
        .iter()
        .any(|s| s.path.starts_with(canon(&outer)) && !s.path.starts_with(canon(&repo))));

    // The project switch leaves the parents out too.
    let d = discovery().project_files(false).discover();
    assert!(d.get("playwright").is_none() && d.get("shared").is_none());

    // A `.git` file (a worktree or a submodule) marks a Git root as well.
    std::fs::write(
        services.join(".git"),
        "gitdir: ../.git/worktrees/services\n",
    )
    .unwrap();
    let d = discovery().discover();
    assert_eq!(command_of(&d, "shared"), "from-services");
    assert!(
        d.get("playwright").is_none(),
        "the repository above the worktree's root is not read"
    );
    std::fs::remove_file(services.join(".git")).unwrap();

    // Outside a repository no parent is read.
    std::fs::remove_dir_all(repo.join(".git")).unwrap();
    let d = discovery().discover();
    assert!(d.get("playwright").is_none() && d.get("shared").is_none());
    assert!(
        !discovery()
            .sources()
            .iter()
            .any(|s| s.path == canon(&repo).join(".mcp.json")),
        "no parent is searched outside a repository"
    );

    // At the Git root itself, its own files are the project's rows.
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let d = Discovery::new()
        .project_dir(&repo)
        .env(w.env.clone())
        .discover();
    assert_eq!(
        d.get("playwright").unwrap().source,
        Some(canon(&repo).join(".mcp.json"))
    );
    assert_eq!(
        d.files
            .iter()
            .filter(|f| f.source.path == canon(&repo).join(".mcp.json"))
            .count(),
        1,
        "read once"
    );
}

/// Gemini CLI's server-name lists: `mcp.allowed` / `mcp.excluded` (v2)
/// and `allowMCPServers` / `excludeMCPServers` (v1) disable the servers
/// they leave out, with a note; `trust` is read and ignored.
#[test]
fn gemini_allowed_and_excluded_servers() {
    let w = World::new("geminilists");
    let user = w.write(
        &w.home.join(".gemini/settings.json"),
        r#"{
  "mcp": { "allowed": ["kept", "both"], "excluded": ["both"] },
  "mcpServers": {
    "kept": { "command": "k", "trust": true },
    "both": { "command": "b" },
    "other": { "command": "o" }
  }
}"#,
    );
    let project = w.write(
        &w.project.join(".gemini/settings.json"),
        r#"{
  "excludeMCPServers": ["legacy-off"],
  "mcpServers": { "legacy-off": { "command": "l" }, "legacy-on": { "command": "m" } }
}"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let enabled = |n: &str| config_of(&d, n).is_enabled();
    assert!(enabled("kept"));
    assert!(!enabled("both"), "excluded wins over allowed");
    assert!(!enabled("other"), "not in mcp.allowed");
    assert!(!enabled("legacy-off"));
    assert!(enabled("legacy-on"));
    let notes = |p: &Path| {
        d.files
            .iter()
            .find(|f| f.source.path == p)
            .unwrap()
            .notes
            .clone()
    };
    let user_notes = notes(&user);
    assert_eq!(user_notes.len(), 2, "{user_notes:?}");
    assert!(user_notes
        .iter()
        .any(|n| n.contains("`mcpServers.both`") && n.contains("listed in `mcp.excluded`")));
    assert!(user_notes
        .iter()
        .any(|n| n.contains("`mcpServers.other`") && n.contains("not in `mcp.allowed`")));
    assert!(notes(&project)[0].contains("listed in `excludeMCPServers`"));

    w.write(
        &w.project.join(".gemini/settings.json"),
        r#"{"mcp": {"allowed": "all"}, "mcpServers": {"x": {"command": "x"}}}"#,
    );
    let d = w.discovery().discover();
    assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
    assert!(d.errors[0]
        .message
        .contains("`mcp.allowed` must be an array of strings"));
}

/// YAML merge keys (YAML 1.1, <https://yaml.org/type/merge.html>) in a
/// hand-edited Goose `config.yaml`: `<<: *anchor` and `<<: [*a, *b]` add
/// the keys an entry does not have, its own keys win wherever they stand,
/// an earlier mapping of a list wins over a later one, nested mappings
/// and anchors that merge in turn are merged too, and a merge key that is
/// not a mapping (or a list of them) fails only its extension, naming it.
#[test]
fn goose_merge_keys() {
    let w = World::new("goosemerge");
    let path = paths::goose_config(&w.env).unwrap();
    w.write(
        &path,
        r#"GOOSE_PROVIDER: openai
GOOSE_MODEL: gpt-4o
x-stdio: &stdio
  type: stdio
  enabled: true
  timeout: 300
  envs: &log
    LOG_LEVEL: info
    LOG_FORMAT: text
x-slow: &slow
  timeout: 900
  available_tools: [search]
x-node: &node
  <<: *stdio
  cmd: node
extensions:
  github:
    <<: *stdio
    cmd: npx
    args:
    - -y
    - '@modelcontextprotocol/server-github'
    name: github
  search:
    timeout: 60
    <<: [*slow, *stdio]
    cmd: uvx
    args: [mcp-server-search]
  scripts:
    <<: *node
    args: [scripts/mcp.js]
    envs:
      <<: *log
      LOG_LEVEL: debug
  remote:
    <<:
      type: streamable_http
      uri: https://mcp.example.com/mcp
    enabled: false
  broken:
    <<: not-a-mapping
    cmd: x
"#,
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);

    let gh = config_of(&d, "github");
    assert_eq!(gh.command.as_deref(), Some("npx"));
    assert_eq!(
        gh.transport(),
        Ok(mcpwire::config::TransportKind::Stdio),
        "`type` comes from the anchor"
    );
    assert_eq!(gh.enabled, Some(true));
    assert_eq!(gh.timeout, Some(300_000));
    assert_eq!(gh.env["LOG_LEVEL"], "info");

    let search = d.get("search").unwrap();
    let c = search.config.as_ref().unwrap();
    assert_eq!(c.timeout, Some(60_000), "the entry's own key wins");
    assert_eq!(
        c.env["LOG_FORMAT"], "text",
        "from the list's second mapping"
    );
    assert!(
        search.tools.allows("search") && !search.tools.allows("other"),
        "from the list's first mapping"
    );

    let scripts = config_of(&d, "scripts");
    assert_eq!(
        scripts.command.as_deref(),
        Some("node"),
        "an anchor that merges in turn"
    );
    assert_eq!(scripts.timeout, Some(300_000));
    assert_eq!(scripts.args, ["scripts/mcp.js"]);
    assert_eq!(scripts.env["LOG_LEVEL"], "debug", "a nested merge");
    assert_eq!(scripts.env["LOG_FORMAT"], "text");
    assert!(!scripts.env.contains_key("<<"));

    let remote = config_of(&d, "remote");
    assert_eq!(
        remote.transport(),
        Ok(mcpwire::config::TransportKind::StreamableHttp)
    );
    assert_eq!(remote.url.as_deref(), Some("https://mcp.example.com/mcp"));
    assert_eq!(remote.enabled, Some(false));

    let e = d.get("broken").unwrap().config.clone().unwrap_err();
    assert!(
        e.contains("`<<`") && e.contains("merge key") && e.contains("mapping"),
        "{e}"
    );

    // A merge key above the extensions is applied too; a bad one there
    // is the file's error.
    w.write(
        &path,
        "x-base: &base\n  extensions:\n    inherited:\n      type: stdio\n      cmd: from-base\n<<: *base\n",
    );
    let d = w.discovery().discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    assert_eq!(command_of(&d, "inherited"), "from-base");
    w.write(&path, "extensions:\n  <<: [1]\n");
    let d = w.discovery().discover();
    let err = &d.errors.iter().find(|e| e.path == path).unwrap().message;
    assert!(err.contains("`extensions.<<`"), "{err}");
}

/// Goose's `env_keys`: from the environment, else its `secrets.yaml` (its
/// file store when the keyring is disabled); a key in neither fails only
/// that extension. Anchors and aliases in `config.yaml` are resolved.
#[test]
fn goose_env_keys_secrets_and_aliases() {
    let w = World::new("goosesecrets");
    let config = paths::goose_config(&w.env).unwrap();
    let secrets = w.write(
        &paths::goose_secrets(&w.env).unwrap(),
        "GITHUB_PERSONAL_ACCESS_TOKEN: ghp_fromfile${x}\nNUMERIC_KEY: 12345\nFROM_ENV: from-file\n",
    );
    w.write(
        &config,
        r#"GOOSE_PROVIDER: openai
x-defaults: &defaults
  type: stdio
  enabled: true
  timeout: 300
  envs: &common_envs
    LOG_LEVEL: info
extensions:
  github:
    <<: *defaults
    type: stdio
    cmd: npx
    args: [-y, '@modelcontextprotocol/server-github']
    envs: *common_envs
    env_keys: [GITHUB_PERSONAL_ACCESS_TOKEN, NUMERIC_KEY, FROM_ENV]
    timeout: 300
  nokey:
    type: stdio
    cmd: other
    env_keys: [MISSING_TOKEN]
  given:
    type: stdio
    cmd: third
    envs: { MISSING_TOKEN: inline }
    env_keys: [MISSING_TOKEN]
  shared-args: &shared
    type: stdio
    cmd: shared
    args: [--flag]
  shared-copy: *shared
"#,
    );
    let home = w.home.to_string_lossy().into_owned();
    let env = Env::from_pairs([
        ("HOME", home.clone()),
        ("USERPROFILE", home.clone()),
        (
            "XDG_CONFIG_HOME",
            w.home.join(".config").to_string_lossy().into_owned(),
        ),
        (
            "APPDATA",
            w.home
                .join("AppData/Roaming")
                .to_string_lossy()
                .into_owned(),
        ),
        ("FROM_ENV", "from-env".to_string()),
    ]);
    let d = w.discovery().env(env).discover();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let gh = config_of(&d, "github");
    assert_eq!(gh.env["LOG_LEVEL"], "info", "an alias reads as its anchor");
    assert_eq!(
        gh.env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_fromfile$${x}",
        "a secrets.yaml value is literal"
    );
    assert_eq!(gh.env["NUMERIC_KEY"], "12345");
    assert_eq!(gh.env["FROM_ENV"], "${FROM_ENV}", "the environment wins");
    let e = d.get("nokey").unwrap().config.clone().unwrap_err();
    assert!(
        e.contains("`env_keys`")
            && e.contains("`MISSING_TOKEN`")
            && e.contains(&secrets.display().to_string())
            && e.contains("keyring is not read"),
        "{e}"
    );
    assert_eq!(config_of(&d, "given").env["MISSING_TOKEN"], "inline");
    assert_eq!(config_of(&d, "shared-copy").args, ["--flag"]);
    assert_eq!(
        config_of(&d, "shared-copy").command.as_deref(),
        Some("shared")
    );

    // A secrets.yaml that does not parse fails the extensions that need it.
    w.write(&secrets, "GITHUB_PERSONAL_ACCESS_TOKEN: [unclosed\n");
    let d = w.discovery().discover();
    let e = d.get("github").unwrap().config.clone().unwrap_err();
    assert!(
        e.contains("`env_keys`") && e.contains("secrets.yaml") && e.contains("not valid YAML"),
        "{e}"
    );
}
