//! Where things are: the home directory, each host's config file, the
//! cache directory. Every environment read goes through an
//! [`Env`], so tests can point it all at a temporary directory.

use std::path::PathBuf;
use std::sync::Arc;

/// An environment lookup: the process environment by default, anything
/// else (a map, a layered lookup) when the host or a test says so.
#[derive(Clone)]
pub struct Env(Arc<LookupFn>);

/// The shape of an environment lookup.
pub type LookupFn = dyn Fn(&str) -> Option<String> + Send + Sync;

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Env(Arc::new(|name| std::env::var(name).ok()))
    }

    /// A lookup function.
    pub fn from_fn(f: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Env(Arc::new(f))
    }

    /// Fixed variables only (nothing from the process).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let map: std::collections::HashMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Env(Arc::new(move |name| map.get(name).cloned()))
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// The value of `name` if set and not empty, as a path.
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.get(name).filter(|v| !v.is_empty()).map(PathBuf::from)
    }

    /// The lookup as a plain function reference (for core's expansion).
    pub fn as_fn(&self) -> &LookupFn {
        &*self.0
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::process()
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env(..)")
    }
}

/// The user's home: `$HOME`, else `%USERPROFILE%` (the other way round
/// on Windows).
pub fn home_dir(env: &Env) -> Option<PathBuf> {
    if cfg!(windows) {
        env.path("USERPROFILE").or_else(|| env.path("HOME"))
    } else {
        env.path("HOME").or_else(|| env.path("USERPROFILE"))
    }
}

/// Claude Desktop's `claude_desktop_config.json`:
/// macOS `~/Library/Application Support/Claude/`, Windows
/// `%APPDATA%\Claude\`, elsewhere `$XDG_CONFIG_HOME/Claude/` (default
/// `~/.config/Claude/`).
pub fn claude_desktop_config(env: &Env) -> Option<PathBuf> {
    const FILE: &str = "claude_desktop_config.json";
    let dir = if cfg!(target_os = "macos") {
        home_dir(env)?.join("Library/Application Support/Claude")
    } else if cfg!(windows) {
        env.path("APPDATA")
            .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Roaming")))?
            .join("Claude")
    } else {
        env.path("XDG_CONFIG_HOME")
            .or_else(|| home_dir(env).map(|h| h.join(".config")))?
            .join("Claude")
    };
    Some(dir.join(FILE))
}

/// Codex's `config.toml`: `$CODEX_HOME/config.toml`, default
/// `~/.codex/config.toml`.
pub fn codex_config(env: &Env) -> Option<PathBuf> {
    let dir = env
        .path("CODEX_HOME")
        .or_else(|| home_dir(env).map(|h| h.join(".codex")))?;
    Some(dir.join("config.toml"))
}

/// Windsurf's `mcp_config.json`: `~/.codeium/windsurf/mcp_config.json`.
pub fn windsurf_config(env: &Env) -> Option<PathBuf> {
    Some(home_dir(env)?.join(".codeium/windsurf/mcp_config.json"))
}

/// GitHub Copilot CLI's `mcp-config.json` in its configuration
/// directory: `$COPILOT_HOME` when set, else `~/.copilot`.
pub fn copilot_config(env: &Env) -> Option<PathBuf> {
    let dir = env
        .path("COPILOT_HOME")
        .or_else(|| home_dir(env).map(|h| h.join(".copilot")))?;
    Some(dir.join("mcp-config.json"))
}

/// Gemini CLI's user settings: `~/.gemini/settings.json`.
pub fn gemini_settings(env: &Env) -> Option<PathBuf> {
    Some(home_dir(env)?.join(".gemini/settings.json"))
}

/// Zed's user `settings.json`: `~/.config/zed/` on macOS,
/// `%APPDATA%\Zed\` on Windows, elsewhere `$XDG_CONFIG_HOME/zed/`
/// (default `~/.config/zed/`).
pub fn zed_settings(env: &Env) -> Option<PathBuf> {
    let dir = if cfg!(target_os = "macos") {
        home_dir(env)?.join(".config/zed")
    } else if cfg!(windows) {
        env.path("APPDATA")
            .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Roaming")))?
            .join("Zed")
    } else {
        env.path("XDG_CONFIG_HOME")
            .or_else(|| home_dir(env).map(|h| h.join(".config")))?
            .join("zed")
    };
    Some(dir.join("settings.json"))
}

/// The directory under which VS Code and its builds keep their `User`
/// folder: `~/Library/Application Support/` on macOS, `%APPDATA%` on
/// Windows, elsewhere `$XDG_CONFIG_HOME` (default `~/.config`).
fn vscode_family_dir(env: &Env) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        Some(home_dir(env)?.join("Library/Application Support"))
    } else if cfg!(windows) {
        env.path("APPDATA")
            .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Roaming")))
    } else {
        env.path("XDG_CONFIG_HOME")
            .or_else(|| home_dir(env).map(|h| h.join(".config")))
    }
}

/// VS Code's user-profile `mcp.json`: `Code/User/mcp.json` in
/// `~/Library/Application Support/` on macOS, `%APPDATA%` on Windows,
/// elsewhere `$XDG_CONFIG_HOME` (default `~/.config`).
pub fn vscode_user_mcp(env: &Env) -> Option<PathBuf> {
    Some(
        vscode_family_dir(env)?
            .join("Code")
            .join("User")
            .join("mcp.json"),
    )
}

/// VS Code Insiders' user-profile `mcp.json`: `Code - Insiders/User/mcp.json`
/// in the same directory as [`vscode_user_mcp`].
pub fn vscode_insiders_user_mcp(env: &Env) -> Option<PathBuf> {
    Some(
        vscode_family_dir(env)?
            .join("Code - Insiders")
            .join("User")
            .join("mcp.json"),
    )
}

/// VSCodium's user-profile `mcp.json`: `VSCodium/User/mcp.json` in the
/// same directory as [`vscode_user_mcp`].
pub fn vscodium_user_mcp(env: &Env) -> Option<PathBuf> {
    Some(
        vscode_family_dir(env)?
            .join("VSCodium")
            .join("User")
            .join("mcp.json"),
    )
}

/// Goose's `config.yaml`: `%APPDATA%\Block\goose\config\` on Windows,
/// elsewhere `$XDG_CONFIG_HOME/goose/` (default `~/.config/goose/`, macOS
/// included).
pub fn goose_config(env: &Env) -> Option<PathBuf> {
    let dir = if cfg!(windows) {
        env.path("APPDATA")
            .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Roaming")))?
            .join("Block")
            .join("goose")
            .join("config")
    } else {
        env.path("XDG_CONFIG_HOME")
            .or_else(|| home_dir(env).map(|h| h.join(".config")))?
            .join("goose")
    };
    Some(dir.join("config.yaml"))
}

/// Goose's `secrets.yaml`, where it keeps secrets when its keyring is
/// disabled (`GOOSE_DISABLE_KEYRING`): next to [`goose_config`].
pub fn goose_secrets(env: &Env) -> Option<PathBuf> {
    Some(goose_config(env)?.with_file_name("secrets.yaml"))
}

/// mcpwire's cache directory: `$XDG_CACHE_HOME/mcpwire` when set, else
/// `~/Library/Caches/mcpwire` on macOS, `%LOCALAPPDATA%\mcpwire\cache` on
/// Windows, `~/.cache/mcpwire` elsewhere.
pub fn cache_dir(env: &Env) -> Option<PathBuf> {
    if let Some(xdg) = env.path("XDG_CACHE_HOME") {
        return Some(xdg.join("mcpwire"));
    }
    if cfg!(target_os = "macos") {
        Some(home_dir(env)?.join("Library/Caches/mcpwire"))
    } else if cfg!(windows) {
        Some(
            env.path("LOCALAPPDATA")
                .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Local")))?
                .join("mcpwire")
                .join("cache"),
        )
    } else {
        Some(home_dir(env)?.join(".cache/mcpwire"))
    }
}

/// mcpwire's configuration directory: `$XDG_CONFIG_HOME/mcpwire` when
/// set, else `~/Library/Application Support/mcpwire` on macOS,
/// `%APPDATA%\mcpwire` on Windows, `~/.config/mcpwire` elsewhere.
pub fn config_dir(env: &Env) -> Option<PathBuf> {
    if let Some(xdg) = env.path("XDG_CONFIG_HOME") {
        return Some(xdg.join("mcpwire"));
    }
    if cfg!(target_os = "macos") {
        Some(home_dir(env)?.join("Library/Application Support/mcpwire"))
    } else if cfg!(windows) {
        Some(
            env.path("APPDATA")
                .or_else(|| home_dir(env).map(|h| h.join("AppData").join("Roaming")))?
                .join("mcpwire"),
        )
    } else {
        Some(home_dir(env)?.join(".config/mcpwire"))
    }
}

/// The user's approvals of project servers: `approvals.json` in
/// [`config_dir`].
pub fn approvals_file(env: &Env) -> Option<PathBuf> {
    Some(config_dir(env)?.join("approvals.json"))
}

/// The tool pins ([`crate::pins`]): `tool-pins.json` in [`config_dir`],
/// beside the approvals.
pub fn tool_pins_file(env: &Env) -> Option<PathBuf> {
    Some(config_dir(env)?.join("tool-pins.json"))
}

/// The user's tool pin store ([`tool_pins_file`]).
pub fn tool_pins(env: &Env) -> Option<mcpwire_adapter::pins::PinStore> {
    tool_pins_file(env).map(mcpwire_adapter::pins::PinStore::at)
}

/// The tool cache file: `tools.json` in [`cache_dir`].
pub fn tool_cache_file(env: &Env) -> Option<PathBuf> {
    Some(cache_dir(env)?.join("tools.json"))
}
