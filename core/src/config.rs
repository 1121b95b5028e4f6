//! Server configuration: the `mcpServers` JSON that MCP hosts already use.
//!
//! ```json
//! { "mcpServers": {
//!     "files": { "command": "npx", "args": ["-y", "@scope/server"], "env": {"K": "V"} },
//!     "remote": { "type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"} },
//!     "old": { "type": "sse", "url": "https://example.com/sse", "timeout": 60000, "enabled": false },
//!     "corp": { "url": "https://mcp.corp.example/mcp", "proxy": "http://user:pass@gw.corp:3128",
//!               "tls": { "ca": "/etc/corp/ca.pem", "cert": "me.pem", "key": "me.key" } } } }
//! ```
//!
//! [`ServerConfig::transport`] validates one entry and says which transport
//! it selects: `type` omitted with `command` → stdio; `"http"` (alias
//! `"streamable-http"`, `"streamableHttp"`) → Streamable HTTP with the
//! spec's fallback to legacy SSE; `"sse"` → legacy HTTP+SSE.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::modern::EraPolicy;

/// One server entry of an `mcpServers` map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// `stdio`, `http` or `sse`; inferred when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Program to spawn (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables for the child (stdio).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the child (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Endpoint (http, sse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Extra request headers (http, sse).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Default per-request timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// `false` disables the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The protocol era to speak: `auto` (default: probe with
    /// `server/discover`, fall back to `initialize`), `legacy` (only the
    /// handshake, 2025-11-25 and earlier) or `modern` (only 2026-07-28).
    #[serde(
        default,
        rename = "protocolEra",
        skip_serializing_if = "Option::is_none"
    )]
    pub protocol_era: Option<String>,
    /// The HTTP proxy for this server's exchanges (http, sse), OAuth's
    /// included: `http://[user:password@]host[:port]`, or `""` for none.
    /// Absent: the `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY`
    /// environment variables decide (`NO_PROXY` applies to this one too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// How `https` connections are verified and which client certificate
    /// they present (http, sse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
}

/// The `tls` object of a server entry: files are PEM, paths absolute or
/// relative to the working directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSettings {
    /// CA certificates to trust besides the system's (one file, any
    /// number of certificates): a private or corporate CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// The client certificate (chain) to present when the server asks
    /// for one (mutual TLS); needs `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    /// The client certificate's private key: PKCS#8, RSA (PKCS#1) or EC
    /// (SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `true` turns certificate verification off (a warning on every
    /// connect). Only for a test server you cannot give a CA for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl TlsSettings {
    /// No extra CA, no client certificate, verification on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts the CA certificates of PEM file `path` besides the system's.
    pub fn ca(mut self, path: impl Into<String>) -> Self {
        self.ca = Some(path.into());
        self
    }

    /// Presents the certificate of PEM file `cert` with the key of PEM
    /// file `key` when the server asks for one.
    pub fn client_cert(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// Turns certificate verification off (`true`) or on.
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// Whether nothing is set (the defaults).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What a valid [`ServerConfig`] connects over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// A child process speaking JSONL on stdin/stdout.
    Stdio,
    /// Streamable HTTP, falling back to legacy SSE when the server refuses
    /// the POST of `initialize` with 400, 404 or 405.
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport.
    LegacySse,
}

/// Why a server entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Both `command` and `url` are set.
    #[error("both `command` and `url` are set; a server is either a process (command) or a URL")]
    CommandAndUrl,
    /// stdio without a command.
    #[error("stdio server without `command`")]
    MissingCommand,
    /// http/sse without a URL.
    #[error("{0} server without `url`")]
    MissingUrl(&'static str),
    /// Neither command nor url.
    #[error("server has neither `command` nor `url`")]
    Empty,
    /// An unknown `type`.
    #[error("unknown server type `{0}` (expected stdio, http or sse)")]
    UnknownType(String),
    /// `protocolEra` is not `auto`, `legacy` or `modern`.
    #[error("unknown protocolEra `{0}` (expected auto, legacy or modern)")]
    UnknownEra(String),
}

impl ServerConfig {
    /// A stdio server running `command`.
    pub fn stdio(command: impl Into<String>) -> Self {
        ServerConfig {
            command: Some(command.into()),
            ..Self::default()
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig {
            kind: Some("http".into()),
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// A legacy HTTP+SSE server whose event stream is at `url`.
    pub fn sse(url: impl Into<String>) -> Self {
        ServerConfig {
            kind: Some("sse".into()),
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the child's working directory.
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Adds an HTTP header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the default request timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout.as_millis().min(u64::MAX as u128) as u64);
        self
    }

    /// Whether the entry is enabled (absent means yes).
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }

    /// The protocol era pinned by `protocolEra`, if any.
    pub fn era_policy(&self) -> Result<Option<EraPolicy>, ConfigError> {
        match self.protocol_era.as_deref() {
            None => Ok(None),
            Some(s) => EraPolicy::parse(s)
                .map(Some)
                .ok_or_else(|| ConfigError::UnknownEra(s.to_owned())),
        }
    }

    /// Pins the protocol era (`auto`, `legacy` or `modern`).
    pub fn era(mut self, era: impl Into<String>) -> Self {
        self.protocol_era = Some(era.into());
        self
    }

    /// Sends this server's exchanges through proxy `url`
    /// (`http://[user:password@]host[:port]`), or through none with `""`.
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.proxy = Some(url.into());
        self
    }

    /// Sets how `https` connections are verified and the client
    /// certificate they present.
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The default request timeout, if configured.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.timeout.map(Duration::from_millis)
    }

    /// Validates the entry and names its transport.
    pub fn transport(&self) -> Result<TransportKind, ConfigError> {
        let kind = match self.kind.as_deref() {
            None => {
                return match (&self.command, &self.url) {
                    (Some(_), Some(_)) => Err(ConfigError::CommandAndUrl),
                    (Some(_), None) => Ok(TransportKind::Stdio),
                    // A URL without a type: Streamable HTTP, which falls
                    // back to legacy SSE by itself.
                    (None, Some(_)) => Ok(TransportKind::StreamableHttp),
                    (None, None) => Err(ConfigError::Empty),
                };
            }
            Some("stdio") => TransportKind::Stdio,
            Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                TransportKind::StreamableHttp
            }
            Some("sse") => TransportKind::LegacySse,
            Some(other) => return Err(ConfigError::UnknownType(other.to_string())),
        };
        if self.command.is_some() && self.url.is_some() {
            return Err(ConfigError::CommandAndUrl);
        }
        match kind {
            TransportKind::Stdio if self.command.is_none() => Err(ConfigError::MissingCommand),
            TransportKind::StreamableHttp if self.url.is_none() => {
                Err(ConfigError::MissingUrl("http"))
            }
            TransportKind::LegacySse if self.url.is_none() => Err(ConfigError::MissingUrl("sse")),
            k => Ok(k),
        }
    }
}

/// A whole config file: `{"mcpServers": {name: ServerConfig}}` (VS Code's
/// `servers` key is accepted too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServersFile {
    /// The servers by name.
    #[serde(default, rename = "mcpServers", alias = "servers")]
    pub servers: BTreeMap<String, ServerConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> ServerConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn transport_selection_and_validation() {
        assert_eq!(
            parse(r#"{"command":"x"}"#).transport(),
            Ok(TransportKind::Stdio)
        );
        assert_eq!(
            parse(r#"{"type":"http","url":"http://h/mcp"}"#).transport(),
            Ok(TransportKind::StreamableHttp)
        );
        assert_eq!(
            parse(r#"{"url":"http://h/mcp"}"#).transport(),
            Ok(TransportKind::StreamableHttp)
        );
        assert_eq!(
            parse(r#"{"type":"sse","url":"http://h/sse"}"#).transport(),
            Ok(TransportKind::LegacySse)
        );
        assert_eq!(
            parse(r#"{"command":"x","url":"http://h"}"#).transport(),
            Err(ConfigError::CommandAndUrl)
        );
        assert_eq!(
            parse(r#"{"type":"stdio"}"#).transport(),
            Err(ConfigError::MissingCommand)
        );
        assert_eq!(
            parse(r#"{"type":"sse"}"#).transport(),
            Err(ConfigError::MissingUrl("sse"))
        );
        assert_eq!(
            parse(r#"{"type":"ws","url":"ws://h"}"#).transport(),
            Err(ConfigError::UnknownType("ws".into()))
        );
        assert_eq!(parse("{}").transport(), Err(ConfigError::Empty));
    }

    #[test]
    fn servers_file_and_builder() {
        let f: ServersFile = serde_json::from_str(
            r#"{"mcpServers":{"a":{"command":"node","args":["s.js"],"env":{"K":"V"},"timeout":500,"enabled":false}}}"#,
        )
        .unwrap();
        let a = &f.servers["a"];
        assert!(!a.is_enabled());
        assert_eq!(a.request_timeout(), Some(Duration::from_millis(500)));
        let built = ServerConfig::stdio("node")
            .arg("s.js")
            .env("K", "V")
            .timeout(Duration::from_millis(500));
        assert_eq!(built.command, a.command);
        assert_eq!(built.args, a.args);
        assert_eq!(built.env, a.env);
    }

    #[test]
    fn proxy_and_tls_fields() {
        let c = parse(
            r#"{"url":"https://h/mcp","proxy":"http://gw:3128","tls":{"ca":"ca.pem","cert":"c.pem","key":"k.pem","insecure":true}}"#,
        );
        assert_eq!(c.proxy.as_deref(), Some("http://gw:3128"));
        let tls = c.tls.clone().unwrap();
        assert_eq!(
            tls,
            TlsSettings::new()
                .ca("ca.pem")
                .client_cert("c.pem", "k.pem")
                .insecure(true)
        );
        let back: ServerConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        // Defaults are not written out.
        let plain = ServerConfig::http("https://h/mcp").tls(TlsSettings::new().ca("x"));
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"type":"http","url":"https://h/mcp","tls":{"ca":"x"}}"#
        );
        assert!(TlsSettings::new().is_default());
    }
}
