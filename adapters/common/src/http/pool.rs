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
//!
//! The origins are few (one server, perhaps its authorization server): a
//! list searched by equality, not a hash map (which hashed the host once
//! for the checkout, once to drop the emptied list and once for the
//! check-in, and made the list again). A list left empty by a checkout is
//! kept for the check-in; empty ones go when there are more than
//! [`KEPT_EMPTY`] origins.

use std::time::{Duration, Instant};

use mcpwire::exchange::proxy::ProxyUrl;
use mcpwire::exchange::url::Scheme;
use mcpwire::exchange::HttpUrl;

/// Where a connection goes: connections are only shared within an origin
/// and a route (directly, or through one proxy with one set of
/// credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Past this many origins, those without idle connections are forgotten.
const KEPT_EMPTY: usize = 8;

/// Idle connections by origin.
pub(super) struct Pool<S> {
    idle: Vec<(Key, Vec<Idle<S>>)>,
    max_idle: usize,
    idle_timeout: Duration,
    closed: bool,
}

impl<S> Pool<S> {
    /// An empty pool with the given policy.
    pub(super) fn new(max_idle: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: Vec::new(),
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
        let list = self.list(key)?;
        while let Some(idle) = list.pop() {
            if looks_alive(&idle.conn.stream) {
                return Some(idle.conn);
            }
            tracing::trace!(conn = idle.conn.serial, "dropping closed idle connection");
        }
        None
    }

    /// `key`'s list, if it has one.
    fn list(&mut self, key: &Key) -> Option<&mut Vec<Idle<S>>> {
        self.idle
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, list)| list)
    }

    /// Keeps `conn` for the next exchange with `key` (or drops it if the
    /// pool is closed or `max_idle` is zero).
    pub(super) fn put(&mut self, key: Key, conn: Conn<S>, now: Instant) {
        self.expire(now);
        if self.closed || self.max_idle == 0 {
            return;
        }
        let list = match self.idle.iter().position(|(k, _)| *k == key) {
            Some(i) => &mut self.idle[i].1,
            None => {
                self.idle.push((key, Vec::new()));
                let last = self.idle.len() - 1;
                &mut self.idle[last].1
            }
        };
        list.push(Idle { conn, since: now });
        if list.len() > self.max_idle {
            list.remove(0);
        }
    }

    /// Drops every idle connection to `key` (one turned out dead: the
    /// others, as old or older, likely are too).
    pub(super) fn purge(&mut self, key: &Key) {
        if let Some(list) = self.list(key) {
            list.clear();
        }
    }

    /// Stops pooling and hands back every idle connection (for the
    /// caller to drop, i.e. close, outside the lock).
    pub(super) fn close(&mut self) -> Vec<Conn<S>> {
        self.closed = true;
        self.idle
            .drain(..)
            .flat_map(|(_, list)| list)
            .map(|idle| idle.conn)
            .collect()
    }

    /// How many idle connections there are (all origins).
    pub(super) fn idle_count(&self) -> usize {
        self.idle.iter().map(|(_, list)| list.len()).sum()
    }

    /// Drops idle connections older than the idle timeout.
    fn expire(&mut self, now: Instant) {
        let timeout = self.idle_timeout;
        for (_, list) in &mut self.idle {
            list.retain(|idle| now.saturating_duration_since(idle.since) < timeout);
        }
        if self.idle.len() > KEPT_EMPTY {
            self.idle.retain(|(_, list)| !list.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str) -> Key {
        let url = HttpUrl::parse(&format!("http://{host}:8080/mcp")).unwrap();
        Key::of(&url, None)
    }

    fn conn(serial: u64) -> Conn<u64> {
        Conn {
            stream: serial,
            buf: Box::new([]),
            serial,
        }
    }

    #[test]
    fn checkout_is_last_in_first_out_per_origin_and_skips_the_dead() {
        let (a, b) = (key("a"), key("b"));
        let now = Instant::now();
        let mut pool = Pool::new(4, Duration::from_secs(60));
        pool.put(a.clone(), conn(1), now);
        pool.put(a.clone(), conn(2), now);
        pool.put(b.clone(), conn(3), now);
        let take = |p: &mut Pool<u64>, k: &Key| p.take(k, now, |s| *s != 2).map(|c| c.serial);
        // 2 is newest for `a` but looks closed: dropped, 1 comes.
        assert_eq!(take(&mut pool, &a), Some(1));
        assert_eq!(take(&mut pool, &a), None);
        assert_eq!(take(&mut pool, &b), Some(3));
        assert_eq!(pool.idle_count(), 0);
        // The emptied lists are kept for the check-ins.
        pool.put(a.clone(), conn(4), now);
        assert_eq!(pool.idle.len(), 2);
        assert_eq!(take(&mut pool, &a), Some(4));
    }

    #[test]
    fn the_bounds_hold() {
        let a = key("a");
        let now = Instant::now();
        let mut pool = Pool::new(2, Duration::from_secs(60));
        for serial in 1..=3 {
            pool.put(a.clone(), conn(serial), now);
        }
        // Beyond max_idle the oldest goes.
        assert_eq!(pool.idle_count(), 2);
        assert_eq!(pool.take(&a, now, |_| true).map(|c| c.serial), Some(3));
        assert_eq!(pool.take(&a, now, |_| true).map(|c| c.serial), Some(2));
        // Expired after the idle timeout.
        pool.put(a.clone(), conn(4), now);
        assert!(pool
            .take(&a, now + Duration::from_secs(61), |_| true)
            .is_none());
        // Origins without idle connections are forgotten past KEPT_EMPTY.
        for i in 0..=KEPT_EMPTY {
            let k = key(&format!("h{i}"));
            pool.put(k.clone(), conn(10), now);
            assert!(pool.take(&k, now, |_| true).is_some());
        }
        pool.put(a.clone(), conn(5), now);
        assert!(pool.idle.len() <= KEPT_EMPTY + 1, "{}", pool.idle.len());
        // Purged, then closed: nothing pooled any more.
        pool.purge(&a);
        assert_eq!(pool.idle_count(), 0);
        pool.put(a.clone(), conn(6), now);
        assert_eq!(pool.close().len(), 1);
        pool.put(a.clone(), conn(7), now);
        assert_eq!(pool.idle_count(), 0);
    }
}
