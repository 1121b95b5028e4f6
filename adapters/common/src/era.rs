//! The protocol era each server was found to speak, remembered for the
//! life of the process, so that a second connection to a legacy server
//! does not probe again (the spec: the era is a property of the server;
//! cache it, re-probe when the assumption fails — the core does that).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use mcpwire::connection::Era;
use mcpwire::ServerConfig;

/// Most servers remembered (oldest forgotten first).
const MAX_REMEMBERED: usize = 1024;

/// Era by server, and the servers in the order they were first recorded.
type Table = (HashMap<String, Era>, Vec<String>);

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// What identifies a server: its URL, or its command line and directory.
fn key(server: &ServerConfig) -> String {
    match &server.url {
        Some(url) => format!("url {url}"),
        None => format!(
            "cmd {:?} {:?} {:?}",
            server.command, server.args, server.cwd
        ),
    }
}

/// The era `server` was last found to speak in this process, if any.
pub fn recall(server: &ServerConfig) -> Option<Era> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0.get(&key(server)).copied()
}

/// Records the era `server` speaks.
pub fn remember(server: &ServerConfig, era: Era) {
    let k = key(server);
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if t.0.insert(k.clone(), era).is_none() {
        t.1.push(k);
        if t.1.len() > MAX_REMEMBERED {
            let old = t.1.remove(0);
            t.0.remove(&old);
        }
    }
}

/// Forgets what was remembered of `server`: a new server now answers at
/// its URL or command line (a test server on a reused port, say).
pub fn forget(server: &ServerConfig) {
    let k = key(server);
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if t.0.remove(&k).is_some() {
        t.1.retain(|old| *old != k);
    }
}

/// Forgets every server (tests, or after a fleet upgrade).
pub fn forget_all() {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0.clear();
    t.1.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_url_and_by_command_line() {
        let a = ServerConfig::http("http://127.0.0.1:1/mcp");
        let b = ServerConfig::stdio("srv").arg("--x");
        let c = ServerConfig::stdio("srv").arg("--y");
        remember(&a, Era::Legacy);
        remember(&b, Era::Modern);
        assert_eq!(recall(&a), Some(Era::Legacy));
        assert_eq!(recall(&b), Some(Era::Modern));
        assert_eq!(recall(&c), None);
        remember(&a, Era::Modern);
        assert_eq!(recall(&a), Some(Era::Modern));
    }
}
