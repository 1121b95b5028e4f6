//! The keep-alive pool: idle connections by origin, so that sequential
//! exchanges with one server reuse a connection instead of reconnecting.
//!
//! Policy: at most `max_idle` idle connections per (scheme, host, port,
//! proxy),
//! each kept at most `idle_timeout`; checkout is last-in first-out (the
//! most recently used connection is the likeliest to be alive) and skips
//! connections that look closed; a check-in beyond `max_idle` drops the
//! oldest. Expiry is lazy (on every checkout and check-in), so no timer
//! task is needed. After [`Pool::close`] nothing is pooled any more.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mcpwire::exchange::proxy::ProxyUrl;
use mcpwire::exchange::url::Scheme;
use mcpwire::exchange::HttpUrl;

/// Where a connection goes: connections are only shared within an origin
/// and a route (directly, or through one proxy with one set of
/// credentials).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    scheme: Scheme,
    host: String,
    port: u16,
    proxy: Option<ProxyUrl>,
}

impl Key {
    /// The origin of `url`, reached through `proxy` (or directly).
    pub(super) fn of(url: &HttpUrl, proxy: Option<&ProxyUrl>) -> Key {
        Key {
            scheme: url.scheme(),
            host: url.host().to_owned(),
            port: url.port(),
            proxy: proxy.cloned(),
        }
    }
}

/// A connection between exchanges: the stream and its read buffer.
pub(super) struct Conn<S> {
    /// The byte stream.
    pub(super) stream: S,
    /// The read buffer (fixed size, reused by each exchange).
    pub(super) buf: Box<[u8]>,
    /// A number for logs, unique within the process.
    pub(super) serial: u64,
}

struct Idle<S> {
    conn: Conn<S>,
    since: Instant,
}

/// Idle connections by origin.
pub(super) struct Pool<S> {
    idle: HashMap<Key, Vec<Idle<S>>>,
    max_idle: usize,
    idle_timeout: Duration,
    closed: bool,
}

impl<S> Pool<S> {
    /// An empty pool with the given policy.
    pub(super) fn new(max_idle: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: HashMap::new(),
            max_idle,
            idle_timeout,
            closed: false,
        }
    }

    /// The most recently pooled live connection to `key`, if any
    /// (`looks_alive` probes each candidate).
    pub(super) fn take(
        &mut self,
        key: &Key,
        now: Instant,
        looks_alive: impl Fn(&S) -> bool,
    ) -> Option<Conn<S>> {
        self.expire(now);
        let list = self.idle.get_mut(key)?;
        let mut found = None;
        while let Some(idle) = list.pop() {
            if looks_alive(&idle.conn.stream) {
                found = Some(idle.conn);
                break;
            }
            tracing::trace!(conn = idle.conn.serial, "dropping closed idle connection");
        }
        if list.is_empty() {
            self.idle.remove(key);
        }
        found
    }

    /// Keeps `conn` for the next exchange with `key` (or drops it if the
    /// pool is closed or `max_idle` is zero).
    pub(super) fn put(&mut self, key: Key, conn: Conn<S>, now: Instant) {
        self.expire(now);
        if self.closed || self.max_idle == 0 {
            return;
        }
        let list = self.idle.entry(key).or_default();
        list.push(Idle { conn, since: now });
        if list.len() > self.max_idle {
            list.remove(0);
        }
    }

    /// Drops every idle connection to `key` (one turned out dead: the
    /// others, as old or older, likely are too).
    pub(super) fn purge(&mut self, key: &Key) {
        self.idle.remove(key);
    }

    /// Stops pooling and hands back every idle connection (for the
    /// caller to drop, i.e. close, outside the lock).
    pub(super) fn close(&mut self) -> Vec<Conn<S>> {
        self.closed = true;
        self.idle
            .drain()
            .flat_map(|(_, list)| list)
            .map(|idle| idle.conn)
            .collect()
    }

    /// How many idle connections there are (all origins).
    pub(super) fn idle_count(&self) -> usize {
        self.idle.values().map(Vec::len).sum()
    }

    /// Drops idle connections older than the idle timeout.
    fn expire(&mut self, now: Instant) {
        let timeout = self.idle_timeout;
        self.idle.retain(|_, list| {
            list.retain(|idle| now.saturating_duration_since(idle.since) < timeout);
            !list.is_empty()
        });
    }
}
