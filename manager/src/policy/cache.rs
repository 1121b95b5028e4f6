//! The tool cache: each server's last tool list, so that a host can offer
//! tools before slow servers have connected.
//!
//! One JSON document (the adapter decides where it lives and does the
//! file I/O):
//!
//! ```json
//! { "version": 1,
//!   "entries": {
//!     "fnv1a64:9f0c…:github": { "server": "github", "configHash": "fnv1a64:9f0c…",
//!                               "savedAt": 1767225600, "tools": [ … ] } } }
//! ```
//!
//! An entry is found by server name **and** the hash of its *unexpanded*
//! configuration ([`config_hash`]): `${TOKEN}` is hashed as written, so no
//! secret from the environment is stored or hashed, and a changed entry
//! misses. Entries older than the TTL (30 days by default) miss and are
//! dropped on the next write. A file that does not parse, or has another
//! version, is an empty cache: a miss, never an error.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpwire::config::ServerConfig;
use mcpwire::mcp::types::Tool;

/// The format version this code reads and writes.
pub const CACHE_VERSION: u32 = 1;
/// How long an entry is used: 30 days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Most entries kept (the oldest go first).
pub const MAX_ENTRIES: usize = 512;

/// One server's cached tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    /// The server name.
    pub server: String,
    /// [`config_hash`] of its unexpanded configuration.
    pub config_hash: String,
    /// When the tools were listed, in seconds since the Unix epoch.
    pub saved_at: u64,
    /// The tools, as the server listed them.
    pub tools: Vec<Tool>,
    /// How long the server said that list stays fresh (`ttlMs`,
    /// 2026-07-28, SEP-2549), in milliseconds from `savedAt`: within it
    /// the list is used without asking the server again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ttl_ms: Option<u64>,
}

/// The whole cache file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCache {
    /// Always [`CACHE_VERSION`] when written by this code.
    pub version: u32,
    /// Entries by [`ToolCache::key`].
    #[serde(default)]
    pub entries: BTreeMap<String, CacheEntry>,
    #[serde(skip, default = "default_ttl")]
    ttl: Duration,
}

fn default_ttl() -> Duration {
    DEFAULT_TTL
}

impl Default for ToolCache {
    fn default() -> Self {
        ToolCache {
            version: CACHE_VERSION,
            entries: BTreeMap::new(),
            ttl: DEFAULT_TTL,
        }
    }
}

impl ToolCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a cache file's bytes. Anything unreadable (not JSON, wrong
    /// shape, other version) is an empty cache.
    pub fn parse(bytes: &[u8]) -> Self {
        match serde_json::from_slice::<ToolCache>(bytes) {
            Ok(c) if c.version == CACHE_VERSION => c,
            _ => Self::default(),
        }
    }

    /// The file's contents.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("cache entries serialize")
    }

    /// Sets how long entries are used (default [`DEFAULT_TTL`]).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The key of a (server, config hash) entry.
    pub fn key(server: &str, config_hash: &str) -> String {
        // The hash has a fixed shape without `:` after its prefix, so
        // `hash:name` cannot be ambiguous whatever the name holds.
        format!("{config_hash}:{server}")
    }

    fn fresh(&self, entry: &CacheEntry, now: SystemTime) -> bool {
        let now = secs(now);
        // An entry from the future (clock moved back) counts as new.
        now.saturating_sub(entry.saved_at) < self.ttl.as_secs()
    }

    /// The cached tools of `server` with this unexpanded `config`, if
    /// present and younger than the TTL at `now`.
    pub fn get(&self, server: &str, config: &ServerConfig, now: SystemTime) -> Option<&[Tool]> {
        let hash = config_hash(config);
        let entry = self.entries.get(&Self::key(server, &hash))?;
        (entry.server == server && entry.config_hash == hash && self.fresh(entry, now))
            .then_some(entry.tools.as_slice())
    }

    /// The cached tools of `server` with this unexpanded `config` that
    /// the server said are still fresh at `now` (its `ttlMs`), and for how
    /// much longer.
    pub fn fresh_listing(
        &self,
        server: &str,
        config: &ServerConfig,
        now: SystemTime,
    ) -> Option<(&[Tool], Duration)> {
        let hash = config_hash(config);
        let entry = self.entries.get(&Self::key(server, &hash))?;
        if entry.server != server || entry.config_hash != hash {
            return None;
        }
        // `savedAt` is in whole seconds (rounded down): the list expires
        // up to a second early, never late.
        let until = Duration::from_secs(entry.saved_at)
            .checked_add(Duration::from_millis(entry.server_ttl_ms?))?;
        let now = now.duration_since(UNIX_EPOCH).ok()?;
        let left = until.checked_sub(now).filter(|d| !d.is_zero())?;
        Some((entry.tools.as_slice(), left))
    }

    /// Stores the tools `server` (with this unexpanded `config`) listed at
    /// `now`, and drops expired entries.
    pub fn insert(
        &mut self,
        server: &str,
        config: &ServerConfig,
        tools: Vec<Tool>,
        now: SystemTime,
    ) {
        self.insert_listing(server, config, tools, None, now);
    }

    /// [`insert`](Self::insert) with how long the server said the list
    /// stays fresh (`ttlMs`).
    pub fn insert_listing(
        &mut self,
        server: &str,
        config: &ServerConfig,
        tools: Vec<Tool>,
        server_ttl: Option<Duration>,
        now: SystemTime,
    ) {
        let hash = config_hash(config);
        self.entries.insert(
            Self::key(server, &hash),
            CacheEntry {
                server: server.to_string(),
                config_hash: hash,
                saved_at: secs(now),
                tools,
                server_ttl_ms: server_ttl.map(|t| t.as_millis().min(u128::from(u64::MAX)) as u64),
            },
        );
        self.prune(now);
    }

    /// Drops expired entries, then the oldest beyond [`MAX_ENTRIES`].
    pub fn prune(&mut self, now: SystemTime) {
        let ttl = self.ttl;
        let now_s = secs(now);
        self.entries
            .retain(|_, e| now_s.saturating_sub(e.saved_at) < ttl.as_secs());
        if self.entries.len() > MAX_ENTRIES {
            let mut ages: Vec<(u64, String)> = self
                .entries
                .iter()
                .map(|(k, e)| (e.saved_at, k.clone()))
                .collect();
            ages.sort();
            let excess = self.entries.len() - MAX_ENTRIES;
            for (_, k) in ages.into_iter().take(excess) {
                self.entries.remove(&k);
            }
        }
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A stable hash of an unexpanded server entry: FNV-1a 64 over its
/// canonical JSON (object keys sorted, no whitespace), as
/// `fnv1a64:<16 hex digits>`.
pub fn config_hash(config: &ServerConfig) -> String {
    let value = serde_json::to_value(config).expect("ServerConfig serializes");
    let mut text = String::new();
    canonical_json(&value, &mut text);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// Writes `v` as JSON with object keys in sorted order, whatever map the
/// `serde_json` build uses.
pub fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}})).unwrap()
    }

    fn day(n: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + n * 86_400)
    }

    #[test]
    fn a_servers_ttl_is_kept_and_bounds_the_fresh_listing() {
        let config = ServerConfig::stdio("srv");
        let mut cache = ToolCache::new();
        let t0 = day(0);
        let ttl = Some(Duration::from_secs(10));
        cache.insert_listing("s", &config, vec![tool("a")], ttl, t0);
        let (tools, left) = cache
            .fresh_listing("s", &config, t0 + Duration::from_secs(4))
            .unwrap();
        assert_eq!((tools.len(), left), (1, Duration::from_secs(6)));
        assert!(cache
            .fresh_listing("s", &config, t0 + Duration::from_secs(10))
            .is_none());
        // Still a cached list for startup, only no longer fresh.
        assert!(cache
            .get("s", &config, t0 + Duration::from_secs(11))
            .is_some());
        // Round trip through the file; an entry without a hint is never fresh.
        let cache = ToolCache::parse(cache.to_json().as_bytes());
        assert!(cache.fresh_listing("s", &config, t0).is_some());
        let mut cache = cache;
        cache.insert("s", &config, vec![tool("a")], t0);
        assert!(cache.fresh_listing("s", &config, t0).is_none());
        assert!(!cache.to_json().contains("serverTtlMs"));
    }

    fn cfg() -> ServerConfig {
        ServerConfig::stdio("npx")
            .args(["-y", "server"])
            .env("TOKEN", "${TOKEN}")
    }

    #[test]
    fn round_trip_hit_and_key() {
        let mut c = ToolCache::new();
        c.insert("gh", &cfg(), vec![tool("a"), tool("b")], day(0));
        let text = c.to_json();
        assert!(text.contains("\"version\": 1"), "{text}");
        assert!(!text.contains("${TOKEN}"), "configs are not stored");
        let back = ToolCache::parse(text.as_bytes());
        let tools = back.get("gh", &cfg(), day(1)).unwrap();
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(back.get("other", &cfg(), day(1)).is_none(), "keyed by name");
        assert!(
            back.get("gh", &cfg().arg("--more"), day(1)).is_none(),
            "and by config"
        );
    }

    #[test]
    fn ttl_expires_and_prunes() {
        let mut c = ToolCache::new();
        c.insert("old", &cfg(), vec![tool("a")], day(0));
        assert!(c.get("old", &cfg(), day(29)).is_some());
        assert!(
            c.get("old", &cfg(), day(30)).is_none(),
            "30 days is too old"
        );
        assert!(c
            .get("old", &cfg(), day(0) - Duration::from_secs(60))
            .is_some());
        c.insert("new", &cfg(), vec![tool("b")], day(31));
        assert_eq!(c.entries.len(), 1, "expired entries dropped on write");
        let mut short = ToolCache::new().with_ttl(Duration::from_secs(60));
        short.insert("s", &cfg(), vec![], day(0));
        assert!(short
            .get("s", &cfg(), day(0) + Duration::from_secs(61))
            .is_none());
    }

    #[test]
    fn corrupt_or_foreign_files_are_misses() {
        for bad in [
            &b""[..],
            b"not json",
            b"{\"version\":1,\"entries\":{\"k\":{\"server\":1}}}",
            b"{\"version\":2,\"entries\":{}}",
            b"[1,2]",
            b"{\"version\":1,\"entries\":{\"x:gh\":{\"server\":\"gh\",\"configHash\":\"x\",\"savedAt\":1,\"tools\":[{\"nope\":1}]}}}",
            &[0xff, 0xfe, 0x00],
        ] {
            let c = ToolCache::parse(bad);
            assert!(c.entries.is_empty(), "{:?}", String::from_utf8_lossy(bad));
            assert_eq!(c.version, CACHE_VERSION);
        }
    }

    #[test]
    fn hash_is_stable_and_of_the_unexpanded_text() {
        let a = config_hash(&cfg());
        assert!(a.starts_with("fnv1a64:") && a.len() == 8 + 16, "{a}");
        // Map insertion order does not matter.
        let x: ServerConfig =
            serde_json::from_str(r#"{"command":"c","env":{"A":"1","B":"2"}}"#).unwrap();
        let y: ServerConfig =
            serde_json::from_str(r#"{"env":{"B":"2","A":"1"},"command":"c"}"#).unwrap();
        assert_eq!(config_hash(&x), config_hash(&y));
        assert_ne!(config_hash(&x), config_hash(&ServerConfig::stdio("c")));
        // A fixed vector (FNV-1a 64 of `{"command":"node"}`), so the hash
        // cannot drift between releases.
        assert_eq!(
            config_hash(&ServerConfig::stdio("node")),
            "fnv1a64:377baa771a271184"
        );
        let mut s = String::new();
        canonical_json(&json!({"b": [1, {"d": null, "c": "x"}], "a": true}), &mut s);
        assert_eq!(s, r#"{"a":true,"b":[1,{"c":"x","d":null}]}"#);
    }

    #[test]
    fn entries_are_bounded() {
        let mut c = ToolCache::new();
        for i in 0..(MAX_ENTRIES + 10) {
            c.insert(
                &format!("s{i}"),
                &cfg(),
                vec![],
                day(0) + Duration::from_secs(i as u64),
            );
        }
        assert_eq!(c.entries.len(), MAX_ENTRIES);
        assert!(c.get("s0", &cfg(), day(1)).is_none(), "oldest dropped");
        assert!(c
            .get(&format!("s{}", MAX_ENTRIES + 9), &cfg(), day(1))
            .is_some());
    }
}
