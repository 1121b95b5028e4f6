//! The results a 2026-07-28 server says may be cached (SEP-2549): `ttlMs`
//! and `cacheScope` on `tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list` and `resources/read`.
//!
//! ```text
//!  request ─► key(method, params) ─► get(key, now): fresh ─► the cached result, no round trip
//!                                                  stale / none ─► the server
//!  result (resultType complete, not an MRTR retry) ─► store: ttlMs > 0 ─► kept ttlMs
//!                                                           0 / absent ─► not kept (dropped)
//!  notifications/tools|prompts|resources/list_changed ─► that list's pages dropped
//!  notifications/resources/updated {uri} ─► that resources/read dropped
//! ```
//!
//! The key is the method with its params as the caller gave them (the
//! `uri` of a read, the `cursor` of a page): a different method or params
//! never sees another's result. Results of retries that carry
//! `inputResponses` or `requestState` are never kept. The cache lives in
//! one connection, that is one caller, so `private` and `public` results
//! are both kept there and nothing is shared with another connection.
//! `server/discover` is not cached: the connection sends it only to probe
//! and to ping, and a ping must reach the server.
//!
//! Bounded: at most [`MAX_ENTRIES`] results and [`MAX_BYTES`] in all, none
//! over [`MAX_ENTRY_BYTES`]; the entry closest to going stale goes first.
//! A `ttlMs` beyond [`MAX_TTL`] is cut to it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::mcp::methods::{notifications, MethodId};

/// Most results kept.
pub const MAX_ENTRIES: usize = 256;
/// Most bytes kept in all.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// Results larger than this are not kept.
pub const MAX_ENTRY_BYTES: usize = 4 * 1024 * 1024;
/// The longest a result is kept, whatever its `ttlMs`.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug)]
struct Entry {
    method: MethodId,
    /// The `uri` of a `resources/read`.
    uri: Option<String>,
    raw: Box<RawValue>,
    fresh_until: Instant,
}

/// A connection's cache of hinted results (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct ResultCache {
    entries: HashMap<String, Entry>,
    bytes: usize,
    hits: u64,
}

#[derive(Deserialize)]
struct Hints {
    #[serde(rename = "ttlMs")]
    ttl_ms: Option<Value>,
}

impl ResultCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The key of `method` with the caller's `params`, if its result may be
    /// cached (a cacheable method, not an MRTR retry).
    pub fn key(method: Option<MethodId>, params: &Value) -> Option<String> {
        let method = method.filter(|m| m.spec().cacheable)?.name();
        if params.get("inputResponses").is_some() || params.get("requestState").is_some() {
            return None;
        }
        Some(format!("{method}\n{params}"))
    }

    /// The result kept under `key`, if still fresh at `now`.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<Box<RawValue>> {
        let entry = self.entries.get(key)?;
        if entry.fresh_until <= now {
            let gone = self.entries.remove(key).map_or(0, |e| e.raw.get().len());
            self.bytes -= gone;
            return None;
        }
        self.hits += 1;
        Some(entry.raw.clone())
    }

    /// Results served from the cache so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// How many results are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A complete result of `method` with the caller's `params`, received
    /// at `now`: kept for its `ttlMs` if positive; otherwise (and for
    /// results that may not be cached) an older result under the same key
    /// is dropped.
    pub fn store(
        &mut self,
        method: Option<MethodId>,
        params: &Value,
        raw: &RawValue,
        now: Instant,
    ) {
        let (Some(method), Some(key)) = (method, Self::key(method, params)) else {
            return;
        };
        if let Some(old) = self.entries.remove(&key) {
            self.bytes -= old.raw.get().len();
        }
        let ttl = serde_json::from_str::<Hints>(raw.get())
            .ok()
            .and_then(|h| h.ttl_ms)
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        let size = raw.get().len();
        if ttl == 0 || size > MAX_ENTRY_BYTES {
            return;
        }
        let Some(fresh_until) = now.checked_add(Duration::from_millis(ttl).min(MAX_TTL)) else {
            return;
        };
        let uri = (method == MethodId::ReadResource)
            .then(|| params.get("uri").and_then(Value::as_str).map(str::to_owned))
            .flatten();
        while !self.entries.is_empty()
            && (self.entries.len() >= MAX_ENTRIES || self.bytes + size > MAX_BYTES)
        {
            let first = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.fresh_until)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            if let Some(e) = self.entries.remove(&first) {
                self.bytes -= e.raw.get().len();
            }
        }
        self.bytes += size;
        self.entries.insert(
            key,
            Entry {
                method,
                uri,
                raw: raw.to_owned(),
                fresh_until,
            },
        );
    }

    /// A server notification: drops what it says has changed. Whether
    /// anything was dropped.
    pub fn invalidate(&mut self, notification: &str, params: Option<&RawValue>) -> bool {
        let lists: &[MethodId] = match notification {
            notifications::TOOLS_LIST_CHANGED => &[MethodId::ListTools],
            notifications::PROMPTS_LIST_CHANGED => &[MethodId::ListPrompts],
            notifications::RESOURCES_LIST_CHANGED => {
                &[MethodId::ListResources, MethodId::ListResourceTemplates]
            }
            notifications::RESOURCES_UPDATED => {
                let uri = params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_owned));
                return self.drop_where(|e| {
                    e.method == MethodId::ReadResource && (uri.is_none() || e.uri == uri)
                });
            }
            _ => return false,
        };
        self.drop_where(|e| lists.contains(&e.method))
    }

    /// Drops everything (the connection's authorization changed, or the
    /// caller asked).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    fn drop_where(&mut self, f: impl Fn(&Entry) -> bool) -> bool {
        let before = self.entries.len();
        let mut freed = 0;
        self.entries.retain(|_, e| {
            let keep = !f(e);
            if !keep {
                freed += e.raw.get().len();
            }
            keep
        });
        self.bytes -= freed;
        self.entries.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::methods::MethodId;
    use serde_json::json;

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn fresh_results_are_served_until_their_ttl_then_dropped() {
        let t0 = Instant::now();
        let mut c = ResultCache::new();
        let page = json!({"cursor": "2"});
        c.store(
            MethodId::of("tools/list"),
            &page,
            &raw(json!({"tools": [], "ttlMs": 1000, "cacheScope": "private"})),
            t0,
        );
        let key = ResultCache::key(MethodId::of("tools/list"), &page).unwrap();
        assert!(c.get(&key, t0 + Duration::from_millis(999)).is_some());
        assert_eq!(c.hits(), 1);
        assert!(
            ResultCache::key(MethodId::of("tools/list"), &json!({"cursor": "3"}))
                != Some(key.clone())
        );
        assert!(c.get(&key, t0 + Duration::from_millis(1000)).is_none());
        assert!(c.is_empty(), "a stale entry is dropped");
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn zero_absent_or_bad_ttls_and_other_methods_are_not_kept() {
        let t0 = Instant::now();
        let mut c = ResultCache::new();
        let none = json!(null);
        c.store(
            MethodId::of("tools/list"),
            &none,
            &raw(json!({"tools": [], "ttlMs": 0})),
            t0,
        );
        c.store(
            MethodId::of("prompts/list"),
            &none,
            &raw(json!({"prompts": []})),
            t0,
        );
        c.store(
            MethodId::of("resources/list"),
            &none,
            &raw(json!({"resources": [], "ttlMs": -5})),
            t0,
        );
        c.store(
            MethodId::of("resources/list"),
            &none,
            &raw(json!({"resources": [], "ttlMs": "9"})),
            t0,
        );
        c.store(
            MethodId::of("tools/call"),
            &none,
            &raw(json!({"content": [], "ttlMs": 9000})),
            t0,
        );
        c.store(
            MethodId::of("server/discover"),
            &none,
            &raw(json!({"ttlMs": 9000})),
            t0,
        );
        let retry = json!({"uri": "a://b", "requestState": "x"});
        c.store(
            MethodId::of("resources/read"),
            &retry,
            &raw(json!({"contents": [], "ttlMs": 9000})),
            t0,
        );
        assert!(c.is_empty(), "{c:?}");
        // A new answer without a TTL drops the old one.
        c.store(
            MethodId::of("tools/list"),
            &none,
            &raw(json!({"tools": [], "ttlMs": 9000})),
            t0,
        );
        assert_eq!(c.len(), 1);
        c.store(
            MethodId::of("tools/list"),
            &none,
            &raw(json!({"tools": []})),
            t0,
        );
        assert!(c.is_empty());
    }

    #[test]
    fn notifications_drop_what_changed() {
        let t0 = Instant::now();
        let mut c = ResultCache::new();
        let long = |body: Value| {
            let mut b = body;
            b["ttlMs"] = json!(60_000);
            raw(b)
        };
        c.store(
            MethodId::of("tools/list"),
            &json!(null),
            &long(json!({"tools": []})),
            t0,
        );
        c.store(
            MethodId::of("tools/list"),
            &json!({"cursor": "2"}),
            &long(json!({"tools": []})),
            t0,
        );
        c.store(
            MethodId::of("prompts/list"),
            &json!(null),
            &long(json!({"prompts": []})),
            t0,
        );
        c.store(
            MethodId::of("resources/templates/list"),
            &json!(null),
            &long(json!({"resourceTemplates": []})),
            t0,
        );
        c.store(
            MethodId::of("resources/read"),
            &json!({"uri": "a://1"}),
            &long(json!({"contents": []})),
            t0,
        );
        c.store(
            MethodId::of("resources/read"),
            &json!({"uri": "a://2"}),
            &long(json!({"contents": []})),
            t0,
        );
        assert_eq!(c.len(), 6);
        assert!(c.invalidate("notifications/tools/list_changed", None));
        assert_eq!(c.len(), 4, "both pages");
        assert!(!c.invalidate("notifications/message", None));
        let p = raw(json!({"uri": "a://2"}));
        assert!(c.invalidate("notifications/resources/updated", Some(&p)));
        assert_eq!(c.len(), 3);
        assert!(c.invalidate("notifications/resources/list_changed", None));
        assert_eq!(c.len(), 2, "templates too");
        assert!(c.invalidate("notifications/prompts/list_changed", None));
        c.clear();
        assert!(c.is_empty() && c.bytes == 0);
    }

    #[test]
    fn bounded_by_count_and_bytes_and_ttl() {
        let t0 = Instant::now();
        let mut c = ResultCache::new();
        for i in 0..(MAX_ENTRIES + 10) {
            let ttl = 1000 + i as u64;
            c.store(
                MethodId::of("resources/read"),
                &json!({"uri": format!("a://{i}")}),
                &raw(json!({"contents": [], "ttlMs": ttl})),
                t0,
            );
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        let first =
            ResultCache::key(MethodId::of("resources/read"), &json!({"uri": "a://0"})).unwrap();
        assert!(c.get(&first, t0).is_none(), "the soonest stale went first");
        let big = "x".repeat(MAX_ENTRY_BYTES + 1);
        c.store(
            MethodId::of("resources/read"),
            &json!({"uri": "big"}),
            &raw(json!({"contents": [{"text": big}], "ttlMs": 5000})),
            t0,
        );
        assert!(c
            .get(
                &ResultCache::key(MethodId::of("resources/read"), &json!({"uri": "big"})).unwrap(),
                t0
            )
            .is_none());
        assert!(c.bytes <= MAX_BYTES);
        let k = ResultCache::key(MethodId::of("prompts/list"), &json!(null)).unwrap();
        c.store(
            MethodId::of("prompts/list"),
            &json!(null),
            &raw(json!({"prompts": [], "ttlMs": u64::MAX})),
            t0,
        );
        assert!(c.get(&k, t0 + MAX_TTL - Duration::from_millis(1)).is_some());
        assert!(c.get(&k, t0 + MAX_TTL).is_none());
    }
}
