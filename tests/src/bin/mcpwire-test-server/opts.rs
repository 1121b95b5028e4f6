//! Command-line flags.

use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
usage: mcpwire-test-server [--http [--port N]] [flags]

modes:
  (default)              stdio: one JSON-RPC message per line on stdin/stdout
  --http                 Streamable HTTP on http://127.0.0.1:PORT/mcp; the first
                         stdout line is `listening on http://127.0.0.1:PORT/mcp`;
                         exits when stdin reaches EOF (keep a pipe open!)
  --port N               HTTP port (0 or absent: ephemeral)

flags:
  --era ERA              legacy: only the 2025-11-25 handshake (server/discover
                         is -32601); modern: only 2026-07-28 (server/discover,
                         the _meta envelope, no sessions; initialize is -32022);
                         both (default): either, request by request
  --pre-init WHAT        stdio, legacy era: what a request other than
                         `initialize` or `ping` before `initialize` gets, as
                         handshake-era servers do with the era probe:
                         error (default: -32601), exit (status 1, as the
                         official Rust SDK before 3.x does), silent (no
                         answer), close-stdout (stdout closed, the process
                         stays)
  --max-lifetime SECS    exit after SECS seconds (default 300, 0 = never)
  --ignore-stdin-eof     keep running for 30 s after stdin EOF (both modes)
  --conformance          serve the tools, resources and prompts of the MCP
                         conformance suite's server scenarios (conformance.rs)
  --log-file PATH        append one JSON line per received message / HTTP request
  --no-tools-cap         omit the tools capability from initialize
  --repeat-cursor        tools/list page 2 returns the same nextCursor again
  --list-ttl-ms N        2026-07-28: tools/list pages say ttlMs N (SEP-2549)
  --describe-echo TEXT   tools/list gives `echo` the description TEXT (a server
                         whose tools change after they were approved)
  --extra-tool NAME      tools/list has one more tool, NAME (it is not callable)
                         (both also from MCPWIRE_TEST_DESCRIBE_ECHO and
                         MCPWIRE_TEST_EXTRA_TOOL, inherited from the client)
  --json-responses       HTTP: answer requests with application/json, not SSE
  --no-listener          HTTP: GET /mcp without Last-Event-ID answers 405
  --expire-after N       HTTP: once N requests of a session (not counting
                         `initialize`) have been answered, its next request
                         ends it and gets 404
  --require-auth TOKEN   HTTP: 401 unless `Authorization: Bearer TOKEN`
  --tiny-chunks          HTTP: every body chunked in 1-3 byte chunks
  --oauth                HTTP: /mcp needs a bearer token issued by this server,
                         which is also an OAuth 2.1 authorization server
                         (RFC 9728 and RFC 8414 metadata, /register, /authorize
                         answering 302 at once, /token with PKCE S256 and
                         refresh tokens); see oauth.rs
  --oauth-scope S        with --oauth: the 401 challenge names scope=\"S\" and
                         /authorize requires it
  --oauth-expire-after N with --oauth: an access token is refused after it was
                         accepted for N requests (refresh needed)
  --oauth-resource-root  with --oauth: the protected resource is
                         http://127.0.0.1:PORT (a parent of the endpoint)
  --oauth-reuse-revokes  with --oauth: a spent refresh token presented again
                         revokes its whole grant (every access and refresh
                         token of it; RFC 9700 4.14.2), logged as
                         `grant_revoked`
  --oauth-refresh-delay MS
                         with --oauth: a refresh request is held MS ms before
                         it is answered (logged `refresh_held`); if its client
                         is gone by then it is not carried out
  --tls CERT KEY         HTTP: TLS on the port (PEM certificate chain and key;
                         rustls); the stdout line says https://127.0.0.1:PORT/mcp.
                         Failed handshakes are logged as `tls_refused` events
  --client-ca CA         with --tls: a client certificate signed by CA (PEM) is
                         required (mutual TLS)
  --redirect-hops N      HTTP: MCP is served at /mcp/, and every request to /mcp
                         is redirected there (Starlette style) in N hops:
                         /mcp -> /mcp/hop/1 -> ... -> /mcp/hop/N-1 -> /mcp/
  --redirect-status N    HTTP: the redirects' status (301, 302, 303, 307, 308;
                         default 307); implies --redirect-hops 1 if not given
  --redirect-loop        HTTP: /mcp -> /mcp/loop -> /mcp -> ... (never served)
  --redirect-cross-origin
                         HTTP: a second listener on another port of 127.0.0.1
                         serves the same sessions; the last hop's Location is
                         http://127.0.0.1:PORT2/mcp/ (implies --redirect-hops 1)

A session is strict about its start (HTTP): until its
`notifications/initialized` has arrived, any request but `ping`, any other
notification or response, and the GET stream are refused with 400 and a
JSON-RPC error (logged as a `rejected_before_initialized` event).
";

#[derive(Debug, Clone)]
pub struct Options {
    pub http: bool,
    /// `--conformance`.
    pub conformance: bool,
    pub era: EraMode,
    pub port: u16,
    pub max_lifetime: Option<Duration>,
    pub ignore_stdin_eof: bool,
    pub log_file: Option<PathBuf>,
    pub no_tools_cap: bool,
    pub repeat_cursor: bool,
    pub list_ttl_ms: Option<u64>,
    pub describe_echo: Option<String>,
    pub extra_tool: Option<String>,
    pub json_responses: bool,
    pub no_listener: bool,
    pub expire_after: Option<u64>,
    pub require_auth: Option<String>,
    pub tiny_chunks: bool,
    pub oauth: bool,
    pub oauth_scope: Option<String>,
    pub oauth_expire_after: Option<u64>,
    pub oauth_resource_root: bool,
    pub oauth_reuse_revokes: bool,
    pub oauth_refresh_delay_ms: Option<u64>,
    pub redirect_hops: u32,
    pub redirect_status: u16,
    pub redirect_loop: bool,
    pub redirect_cross_origin: bool,
    pub pre_init: PreInit,
    /// `--tls CERT KEY`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--client-ca CA`.
    pub client_ca: Option<PathBuf>,
}

/// What a request before `initialize` gets (`--pre-init`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreInit {
    Error,
    Exit,
    Silent,
    CloseStdout,
}

/// Which protocol eras the server speaks (`--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraMode {
    Legacy,
    Modern,
    Both,
}

impl EraMode {
    pub fn legacy(self) -> bool {
        self != EraMode::Modern
    }
    pub fn modern(self) -> bool {
        self != EraMode::Legacy
    }
}

pub enum ParseError {
    Help,
    Bad(String),
}

impl Options {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, ParseError> {
        let mut o = Options {
            http: false,
            conformance: false,
            era: EraMode::Both,
            port: 0,
            max_lifetime: Some(Duration::from_secs(300)),
            ignore_stdin_eof: false,
            log_file: None,
            no_tools_cap: false,
            repeat_cursor: false,
            list_ttl_ms: None,
            describe_echo: None,
            extra_tool: None,
            json_responses: false,
            no_listener: false,
            expire_after: None,
            require_auth: None,
            tiny_chunks: false,
            oauth: false,
            oauth_scope: None,
            oauth_expire_after: None,
            oauth_resource_root: false,
            oauth_reuse_revokes: false,
            oauth_refresh_delay_ms: None,
            redirect_hops: 0,
            redirect_status: 0,
            redirect_loop: false,
            redirect_cross_origin: false,
            pre_init: PreInit::Error,
            tls: None,
            client_ca: None,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| -> Result<String, ParseError> {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| ParseError::Bad(format!("{name} needs a value")))
            };
            match flag.as_str() {
                "-h" | "--help" => return Err(ParseError::Help),
                "--http" => o.http = true,
                "--conformance" => o.conformance = true,
                "--tls" => {
                    let cert = value("--tls")?;
                    let key = args
                        .next()
                        .ok_or_else(|| ParseError::Bad("--tls needs CERT and KEY".into()))?;
                    o.tls = Some((PathBuf::from(cert), PathBuf::from(key)));
                }
                "--client-ca" => o.client_ca = Some(PathBuf::from(value("--client-ca")?)),
                "--era" => {
                    let v = value("--era")?;
                    o.era = match v.as_str() {
                        "legacy" | "2025-11-25" => EraMode::Legacy,
                        "modern" | "2026-07-28" => EraMode::Modern,
                        "both" => EraMode::Both,
                        _ => return Err(ParseError::Bad(format!("bad --era {v:?}"))),
                    };
                }
                "--port" => {
                    let v = value("--port")?;
                    o.port = v
                        .parse()
                        .map_err(|_| ParseError::Bad(format!("bad --port {v:?}")))?;
                }
                "--max-lifetime" => {
                    let v = value("--max-lifetime")?;
                    let secs: u64 = v
                        .parse()
                        .map_err(|_| ParseError::Bad(format!("bad --max-lifetime {v:?}")))?;
                    o.max_lifetime = (secs > 0).then(|| Duration::from_secs(secs));
                }
                "--ignore-stdin-eof" => o.ignore_stdin_eof = true,
                "--pre-init" => {
                    o.pre_init = match value("--pre-init")?.as_str() {
                        "error" => PreInit::Error,
                        "exit" => PreInit::Exit,
                        "silent" => PreInit::Silent,
                        "close-stdout" => PreInit::CloseStdout,
                        v => return Err(ParseError::Bad(format!("--pre-init: unknown {v:?}"))),
                    }
                }
                "--log-file" => o.log_file = Some(PathBuf::from(value("--log-file")?)),
                "--no-tools-cap" => o.no_tools_cap = true,
                "--repeat-cursor" => o.repeat_cursor = true,
                "--describe-echo" => o.describe_echo = Some(value("--describe-echo")?),
                "--extra-tool" => o.extra_tool = Some(value("--extra-tool")?),
                "--list-ttl-ms" => {
                    let v = value("--list-ttl-ms")?;
                    let ms: u64 = v
                        .parse()
                        .map_err(|_| ParseError::Bad(format!("bad --list-ttl-ms {v:?}")))?;
                    o.list_ttl_ms = Some(ms);
                }
                "--json-responses" => o.json_responses = true,
                "--no-listener" => o.no_listener = true,
                "--expire-after" => {
                    let v = value("--expire-after")?;
                    let n: u64 = v
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| ParseError::Bad(format!("bad --expire-after {v:?}")))?;
                    o.expire_after = Some(n);
                }
                "--require-auth" => o.require_auth = Some(value("--require-auth")?),
                "--tiny-chunks" => o.tiny_chunks = true,
                "--oauth" => o.oauth = true,
                "--oauth-scope" => o.oauth_scope = Some(value("--oauth-scope")?),
                "--oauth-resource-root" => o.oauth_resource_root = true,
                "--oauth-reuse-revokes" => o.oauth_reuse_revokes = true,
                "--oauth-refresh-delay" => {
                    let v = value("--oauth-refresh-delay")?;
                    let n: u64 = v
                        .parse()
                        .map_err(|_| ParseError::Bad(format!("bad --oauth-refresh-delay {v:?}")))?;
                    o.oauth_refresh_delay_ms = Some(n);
                }
                "--oauth-expire-after" => {
                    let v = value("--oauth-expire-after")?;
                    let n: u64 = v
                        .parse()
                        .map_err(|_| ParseError::Bad(format!("bad --oauth-expire-after {v:?}")))?;
                    o.oauth_expire_after = Some(n);
                }
                "--redirect-hops" => {
                    let v = value("--redirect-hops")?;
                    o.redirect_hops = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or_else(|| ParseError::Bad(format!("bad --redirect-hops {v:?}")))?;
                }
                "--redirect-status" => {
                    let v = value("--redirect-status")?;
                    o.redirect_status = v
                        .parse()
                        .ok()
                        .filter(|n| matches!(n, 301 | 302 | 303 | 307 | 308))
                        .ok_or_else(|| ParseError::Bad(format!("bad --redirect-status {v:?}")))?;
                }
                "--redirect-loop" => o.redirect_loop = true,
                "--redirect-cross-origin" => o.redirect_cross_origin = true,
                other => return Err(ParseError::Bad(format!("unknown argument {other:?}"))),
            }
        }
        if o.redirect_hops == 0 && (o.redirect_status != 0 || o.redirect_cross_origin) {
            o.redirect_hops = 1;
        }
        if o.redirect_status == 0 {
            o.redirect_status = 307;
        }
        if (o.redirect_hops > 0 || o.redirect_loop) && !o.http {
            return Err(ParseError::Bad("the --redirect-* flags need --http".into()));
        }
        if o.redirect_loop && o.redirect_hops > 0 {
            return Err(ParseError::Bad(
                "--redirect-loop excludes the other --redirect-* flags".into(),
            ));
        }
        if o.oauth && !o.http {
            return Err(ParseError::Bad("--oauth needs --http".into()));
        }
        if o.tls.is_some() && !o.http {
            return Err(ParseError::Bad("--tls needs --http".into()));
        }
        if o.client_ca.is_some() && o.tls.is_none() {
            return Err(ParseError::Bad("--client-ca needs --tls".into()));
        }
        if o.expire_after.is_some() && o.era == EraMode::Modern {
            return Err(ParseError::Bad(
                "--expire-after needs sessions (not --era modern)".into(),
            ));
        }
        if o.expire_after.is_some() && !o.http {
            return Err(ParseError::Bad("--expire-after needs --http".into()));
        }
        if o.oauth && o.require_auth.is_some() {
            return Err(ParseError::Bad(
                "--oauth and --require-auth exclude each other".into(),
            ));
        }
        if !o.oauth
            && (o.oauth_scope.is_some()
                || o.oauth_expire_after.is_some()
                || o.oauth_resource_root
                || o.oauth_reuse_revokes
                || o.oauth_refresh_delay_ms.is_some())
        {
            return Err(ParseError::Bad(
                "--oauth-scope, --oauth-expire-after, --oauth-resource-root, \
                 --oauth-reuse-revokes and --oauth-refresh-delay need --oauth"
                    .into(),
            ));
        }
        // The same from the environment, which a client passes on to
        // the server without changing the server's definition.
        if o.describe_echo.is_none() {
            o.describe_echo = std::env::var("MCPWIRE_TEST_DESCRIBE_ECHO").ok();
        }
        if o.extra_tool.is_none() {
            o.extra_tool = std::env::var("MCPWIRE_TEST_EXTRA_TOOL").ok();
        }
        Ok(o)
    }
}
