//! Writing servers into each host's own file: fixtures written the way
//! each host writes its file, the edit compared byte for byte, removal
//! giving the file back byte for byte, unparsable files refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use mcpwire_manager::discovery::{Discovery, Format, Scope, Source};
use mcpwire_manager::hostedit::{self, EditError, FileScope, Host};
use mcpwire_manager::{Env, ServerConfig};

struct Home {
    root: PathBuf,
}

impl Home {
    fn new(tag: &str) -> Home {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "mcpwire-hostedit-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("project")).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        Home { root }
    }

    fn env(&self) -> Env {
        let home = self.root.join("home");
        Env::from_pairs([
            ("HOME", home.display().to_string()),
            (
                "XDG_CONFIG_HOME",
                home.join(".config").display().to_string(),
            ),
            ("CODEX_HOME", home.join(".codex").display().to_string()),
            ("API_KEY", "k".to_string()),
        ])
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    fn file(&self, host: Host, scope: FileScope) -> PathBuf {
        host.file(scope, &self.env(), &self.project()).unwrap()
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The discovered source of `path`.
    fn source(&self, path: &Path) -> Source {
        Discovery::new()
            .env(self.env())
            .project_dir(self.project())
            .sources()
            .into_iter()
            .find(|s| s.path == path)
            .unwrap_or_else(|| panic!("{} is not a discovered file", path.display()))
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn demo() -> ServerConfig {
    ServerConfig::stdio("mcpwire").arg("serve").arg("--demo")
}

/// Adds `demo` to `host`'s file holding `before` (absent: `None`),
/// checks the text against `want`, that discovery reads the server back,
/// then removes it and checks the file is as before.
fn case(host: Host, scope: FileScope, config: &ServerConfig, before: Option<&str>, want: &str) {
    let h = Home::new(host.name());
    let path = h.file(host, scope);
    if let Some(b) = before {
        h.write(&path, b);
    }
    let edit = hostedit::add(host, scope, "demo", config, &h.env(), &h.project()).unwrap();
    assert_eq!(edit.after.as_deref(), Some(want), "{host}: added");
    assert!(edit.diff().contains("+"), "{}", edit.diff());
    edit.apply().unwrap();
    let found = Discovery::new()
        .env(h.env())
        .project_dir(h.project())
        .discover();
    let entry = found
        .get("demo")
        .unwrap_or_else(|| panic!("{host}: not discovered: {:?}", found.errors));
    assert_eq!(entry.source.as_deref(), Some(path.as_path()));
    let read = entry.config.as_ref().unwrap();
    assert_eq!(read.command, config.command, "{host}");
    assert_eq!(read.args, config.args, "{host}");
    assert_eq!(read.url, config.url, "{host}");
    let edit = hostedit::remove(&h.source(&path), "demo", &h.project()).unwrap();
    edit.apply().unwrap();
    match before {
        Some(b) => assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            b,
            "{host}: removed"
        ),
        None => assert!(!path.exists(), "{host}: a file the add created is deleted"),
    }
}

#[test]
fn claude_code_user_local_and_project() {
    // `claude` writes ~/.claude.json with JSON.stringify(config, null, 2).
    let claude = "{\n  \"numStartups\": 12,\n  \"projects\": {\n    \"/elsewhere\": {\n      \"allowedTools\": [],\n      \"mcpServers\": {}\n    }\n  },\n  \"mcpServers\": {\n    \"fs\": {\n      \"type\": \"stdio\",\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"@modelcontextprotocol/server-filesystem\"\n      ],\n      \"env\": {}\n    }\n  },\n  \"userID\": \"abc\"\n}";
    let want = claude.replace(
        "      \"env\": {}\n    }\n  },\n  \"userID\"",
        "      \"env\": {}\n    },\n    \"demo\": {\n      \"type\": \"stdio\",\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {}\n    }\n  },\n  \"userID\"",
    );
    case(
        Host::ClaudeCode,
        FileScope::User,
        &demo(),
        Some(claude),
        &want,
    );
    // A fresh home: the file is created, and deleted again.
    case(
        Host::ClaudeCode,
        FileScope::User,
        &demo(),
        None,
        "{\n  \"mcpServers\": {\n    \"demo\": {\n      \"type\": \"stdio\",\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {}\n    }\n  }\n}\n",
    );
    // A remote server, in the project's .mcp.json.
    let remote = ServerConfig::http("https://mcp.example.com/mcp")
        .header("Authorization", "Bearer ${TOKEN}");
    case(
        Host::ClaudeCode,
        FileScope::Project,
        &remote,
        Some("{\n  \"mcpServers\": {},\n  \"$schema\": \"x\"\n}\n"),
        "{\n  \"mcpServers\": {\n    \"demo\": {\n      \"type\": \"http\",\n      \"url\": \"https://mcp.example.com/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer ${TOKEN}\"\n      }\n    }\n  },\n  \"$schema\": \"x\"\n}\n",
    );
}

#[test]
fn claude_code_local_scope_is_the_projects_entry() {
    let h = Home::new("local");
    let project = h.project().canonicalize().unwrap();
    let key = project.to_string_lossy().into_owned();
    let path = h.file(Host::ClaudeCode, FileScope::Local);
    let before = format!(
        "{{\n  \"projects\": {{\n    {}: {{\n      \"allowedTools\": [],\n      \"mcpServers\": {{}},\n      \"hasTrustDialogAccepted\": true\n    }}\n  }}\n}}",
        serde_json::to_string(&key).unwrap()
    );
    h.write(&path, &before);
    let edit = hostedit::add(
        Host::ClaudeCode,
        FileScope::Local,
        "demo",
        &demo(),
        &h.env(),
        &project,
    )
    .unwrap();
    let after = edit.after.clone().unwrap();
    assert!(
        after.contains(
            "      \"mcpServers\": {\n        \"demo\": {\n          \"type\": \"stdio\","
        ),
        "{after}"
    );
    edit.apply().unwrap();
    let found = Discovery::new()
        .env(h.env())
        .project_dir(&project)
        .discover();
    assert_eq!(found.get("demo").unwrap().scope, Scope::User);
    let source = h.source(&path);
    hostedit::remove(&source, "demo", &project)
        .unwrap()
        .apply()
        .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
}

#[test]
fn claude_desktop_and_cursor_and_windsurf() {
    let desktop = "{\n  \"mcpServers\": {\n    \"weather\": {\n      \"command\": \"uv\",\n      \"args\": [\n        \"run\",\n        \"weather.py\"\n      ]\n    }\n  }\n}";
    case(
        Host::ClaudeDesktop,
        FileScope::User,
        &demo().env("K", "v"),
        Some(desktop),
        "{\n  \"mcpServers\": {\n    \"weather\": {\n      \"command\": \"uv\",\n      \"args\": [\n        \"run\",\n        \"weather.py\"\n      ]\n    },\n    \"demo\": {\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {\n        \"K\": \"v\"\n      }\n    }\n  }\n}",
    );
    let h = Home::new("desktop-remote");
    let e = hostedit::add(
        Host::ClaudeDesktop,
        FileScope::User,
        "r",
        &ServerConfig::http("https://h/mcp"),
        &h.env(),
        &h.project(),
    )
    .unwrap_err();
    assert!(matches!(e, EditError::Unsupported { .. }), "{e}");
    case(
        Host::Cursor,
        FileScope::Project,
        &ServerConfig::http("https://h/mcp"),
        None,
        "{\n  \"mcpServers\": {\n    \"demo\": {\n      \"url\": \"https://h/mcp\"\n    }\n  }\n}\n",
    );
    case(
        Host::Windsurf,
        FileScope::User,
        &ServerConfig::http("https://h/mcp"),
        Some("{\n    \"mcpServers\": {\n        \"git\": {\n            \"command\": \"uvx\",\n            \"args\": [\"mcp-server-git\"],\n            \"disabled\": false\n        }\n    }\n}\n"),
        "{\n    \"mcpServers\": {\n        \"git\": {\n            \"command\": \"uvx\",\n            \"args\": [\"mcp-server-git\"],\n            \"disabled\": false\n        },\n        \"demo\": {\n            \"serverUrl\": \"https://h/mcp\"\n        }\n    }\n}\n",
    );
}

#[test]
fn vscode_jsonc_with_comments_inputs_and_tabs() {
    // VS Code writes its files with tabs, and people comment them.
    let vscode = "{\n\t// Servers for this workspace\n\t\"inputs\": [\n\t\t{\n\t\t\t\"type\": \"promptString\",\n\t\t\t\"id\": \"key\",\n\t\t\t\"password\": true\n\t\t}\n\t],\n\t\"servers\": {\n\t\t\"gh\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.com/mcp/\", // the remote one\n\t\t},\n\t},\n}\n";
    let want = vscode.replace(
        "// the remote one\n\t\t},\n\t},",
        "// the remote one\n\t\t},\n\t\t\"demo\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"mcpwire\",\n\t\t\t\"args\": [\n\t\t\t\t\"serve\",\n\t\t\t\t\"--demo\"\n\t\t\t],\n\t\t\t\"env\": {\n\t\t\t\t\"TOKEN\": \"${env:TOKEN}\"\n\t\t\t}\n\t\t},\n\t},",
    );
    case(
        Host::VsCode,
        FileScope::Project,
        &demo().env("TOKEN", "${TOKEN}"),
        Some(vscode),
        &want,
    );
    // A new file is VS Code's: `servers`, then `inputs`.
    case(
        Host::VsCode,
        FileScope::User,
        &ServerConfig::sse("http://127.0.0.1:3001/sse"),
        None,
        "{\n\t\"servers\": {\n\t\t\"demo\": {\n\t\t\t\"type\": \"sse\",\n\t\t\t\"url\": \"http://127.0.0.1:3001/sse\"\n\t\t}\n\t},\n\t\"inputs\": []\n}\n",
    );
}

#[test]
fn zed_settings_keep_their_comments() {
    let zed = "// Zed settings\n//\n// For information on how to configure Zed, see the Zed\n// documentation: https://zed.dev/docs/configuring-zed\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"postgres\": {\n      \"source\": \"extension\",\n      \"settings\": {}\n    }\n  }\n}\n";
    let want = zed.replace(
        "      \"settings\": {}\n    }\n  }",
        "      \"settings\": {}\n    },\n    \"demo\": {\n      \"source\": \"custom\",\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {}\n    }\n  }",
    );
    case(Host::Zed, FileScope::User, &demo(), Some(zed), &want);
    // No `context_servers` yet: the key is added at the end.
    case(
        Host::Zed,
        FileScope::Project,
        &ServerConfig::http("https://h/mcp"),
        Some("{\n  \"tab_size\": 2 // two\n}\n"),
        "{\n  \"tab_size\": 2, // two\n  \"context_servers\": {\n    \"demo\": {\n      \"url\": \"https://h/mcp\"\n    }\n  }\n}\n",
    );
}

#[test]
fn gemini_and_copilot() {
    case(
        Host::Gemini,
        FileScope::User,
        &ServerConfig::http("https://h/mcp"),
        Some("{\n  \"theme\": \"GitHub\",\n  \"selectedAuthType\": \"oauth-personal\"\n}"),
        "{\n  \"theme\": \"GitHub\",\n  \"selectedAuthType\": \"oauth-personal\",\n  \"mcpServers\": {\n    \"demo\": {\n      \"httpUrl\": \"https://h/mcp\"\n    }\n  }\n}",
    );
    case(
        Host::Copilot,
        FileScope::User,
        &demo(),
        None,
        "{\n  \"mcpServers\": {\n    \"demo\": {\n      \"type\": \"local\",\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {},\n      \"tools\": [\n        \"*\"\n      ]\n    }\n  }\n}\n",
    );
}

#[test]
fn codex_toml_keeps_comments_and_tables() {
    let codex = "model = \"gpt-5-codex\"\napproval_policy = \"on-request\" # ask\n\n# Docs lookups\n[mcp_servers.context7]\ncommand = \"npx\"\nargs = [\"-y\", \"@upstash/context7-mcp\"]\n\n[profiles.fast]\nmodel = \"o4-mini\"\n";
    // toml_edit puts the new table after its siblings.
    let want = codex.replace(
        "\n[profiles.fast]",
        "\n[mcp_servers.demo]\ncommand = \"mcpwire\"\nargs = [\"serve\", \"--demo\"]\n\n[profiles.fast]",
    );
    case(Host::Codex, FileScope::User, &demo(), Some(codex), &want);
    case(
        Host::Codex,
        FileScope::User,
        &demo(),
        None,
        "[mcp_servers.demo]\ncommand = \"mcpwire\"\nargs = [\"serve\", \"--demo\"]\n",
    );
    let remote = ServerConfig::http("https://h/mcp")
        .header("Authorization", "Bearer ${GH_TOKEN}")
        .header("X-Team", "${TEAM}")
        .header("X-Plain", "1");
    case(
        Host::Codex,
        FileScope::Project,
        &remote,
        Some("# project\nmodel = \"o3\"\n"),
        "# project\nmodel = \"o3\"\n\n[mcp_servers.demo]\nurl = \"https://h/mcp\"\nbearer_token_env_var = \"GH_TOKEN\"\nhttp_headers = { X-Plain = \"1\" }\nenv_http_headers = { X-Team = \"TEAM\" }\n",
    );
}

#[test]
fn goose_yaml_as_goose_writes_it() {
    let goose = "GOOSE_PROVIDER: anthropic\nGOOSE_MODEL: claude-sonnet-4\nextensions:\n  developer:\n    bundled: true\n    display_name: Developer\n    enabled: true\n    name: developer\n    timeout: 300\n    type: builtin\n  github:\n    args: []\n    bundled: null\n    cmd: github-mcp-server\n    description: ''\n    enabled: true\n    env_keys:\n    - GITHUB_TOKEN\n    envs: {}\n    name: github\n    timeout: 300\n    type: stdio\nGOOSE_MODE: smart_approve\n";
    let entry = "  demo:\n    args:\n    - serve\n    - '--demo'\n    bundled: null\n    cmd: mcpwire\n    description: ''\n    enabled: true\n    env_keys:\n    - API_KEY\n    envs:\n      LEVEL: debug\n    name: demo\n    timeout: 300\n    type: stdio\n";
    let want = goose.replace("GOOSE_MODE: ", &format!("{entry}GOOSE_MODE: "));
    // env_keys come from the environment (API_KEY is set in Home::env)
    // or secrets.yaml when read back.
    let config = demo().env("API_KEY", "${API_KEY}").env("LEVEL", "debug");
    case(Host::Goose, FileScope::User, &config, Some(goose), &want);
    case(
        Host::Goose,
        FileScope::User,
        &ServerConfig::http("https://h/mcp"),
        None,
        "extensions:\n  demo:\n    bundled: null\n    description: ''\n    enabled: true\n    env_keys: []\n    envs: {}\n    headers: {}\n    name: demo\n    timeout: 300\n    type: streamable_http\n    uri: https://h/mcp\n",
    );
}

#[test]
fn enable_and_disable_with_each_hosts_switch() {
    let h = Home::new("switch");
    let env = h.env();
    let p = h.project();
    for host in [Host::Codex, Host::Goose, Host::Windsurf, Host::Zed] {
        let edit = hostedit::add(host, FileScope::User, "demo", &demo(), &env, &p).unwrap();
        edit.apply().unwrap();
        let path = h.file(host, FileScope::User);
        let added = std::fs::read_to_string(&path).unwrap();
        let source = h.source(&path);
        let off = hostedit::set_enabled(&source, "demo", false, &p).unwrap();
        off.apply().unwrap();
        let found = Discovery::new().env(env.clone()).project_dir(&p).discover();
        let entry = found.get("demo").unwrap();
        assert_eq!(
            entry.config.as_ref().unwrap().enabled,
            Some(false),
            "{host}"
        );
        hostedit::set_enabled(&source, "demo", true, &p)
            .unwrap()
            .apply()
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), added, "{host}");
        hostedit::remove(&source, "demo", &p)
            .unwrap()
            .apply()
            .unwrap();
        assert!(!path.exists(), "{host}");
    }
    for host in [Host::ClaudeCode, Host::Cursor, Host::VsCode, Host::Gemini] {
        hostedit::add(host, FileScope::User, "demo", &demo(), &env, &p)
            .unwrap()
            .apply()
            .unwrap();
        let source = h.source(&h.file(host, FileScope::User));
        let e = hostedit::set_enabled(&source, "demo", false, &p).unwrap_err();
        assert!(matches!(e, EditError::Unsupported { .. }), "{host}: {e}");
    }
}

#[test]
fn unparsable_files_and_existing_names_are_refused() {
    let h = Home::new("refuse");
    let env = h.env();
    let p = h.project();
    for (host, text) in [
        (Host::ClaudeCode, "{\n  \"mcpServers\": {,}\n}"),
        (Host::Codex, "[mcp_servers.x\ncommand = 1\n"),
        (Host::Goose, "extensions: [\n"),
        (Host::Zed, "{ /* open"),
    ] {
        let path = h.file(host, FileScope::User);
        h.write(&path, text);
        let e = hostedit::add(host, FileScope::User, "demo", &demo(), &env, &p).unwrap_err();
        assert!(
            matches!(
                e,
                EditError::Unparsable { .. } | EditError::NotEditable { .. }
            ),
            "{host}: {e}"
        );
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
    let path = h.file(Host::Cursor, FileScope::User);
    h.write(&path, "{\"mcpServers\": {\"demo\": {\"command\": \"x\"}}}");
    let e = hostedit::add(Host::Cursor, FileScope::User, "demo", &demo(), &env, &p).unwrap_err();
    assert!(matches!(e, EditError::Exists { .. }), "{e}");
    // A file changed between the plan and the write is not overwritten.
    let edit = hostedit::add(Host::Cursor, FileScope::User, "other", &demo(), &env, &p).unwrap();
    h.write(&path, "{\"mcpServers\": {}}");
    assert!(matches!(edit.apply(), Err(EditError::Changed(_))));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"mcpServers\": {}}"
    );
}

#[cfg(unix)]
#[test]
fn the_mode_is_kept_and_symlinks_are_written_through() {
    use std::os::unix::fs::PermissionsExt;
    let h = Home::new("mode");
    let real = h.root.join("dotfiles/claude.json");
    h.write(&real, "{}\n");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = h.file(Host::ClaudeCode, FileScope::User);
    std::os::unix::fs::symlink(&real, &link).unwrap();
    hostedit::add(
        Host::ClaudeCode,
        FileScope::User,
        "demo",
        &demo(),
        &h.env(),
        &h.project(),
    )
    .unwrap()
    .apply()
    .unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("\"demo\""));
    let mode = std::fs::metadata(&real).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn sources_map_to_hosts() {
    let src = |p: &str, scope, format| Source {
        path: PathBuf::from(p),
        scope,
        format,
        required: false,
    };
    assert_eq!(
        hostedit::host_of(&src("/h/.cursor/mcp.json", Scope::User, Format::McpJson)),
        Some(Host::Cursor)
    );
    assert_eq!(
        hostedit::host_of(&src("/p/.mcp.json", Scope::Project, Format::McpJson)),
        Some(Host::ClaudeCode)
    );
    assert_eq!(
        hostedit::host_of(&src("/p/mcp.json", Scope::Project, Format::McpJson)),
        None
    );
    for h in Host::ALL {
        assert_eq!(Host::parse(h.name()), Some(h));
    }
}
