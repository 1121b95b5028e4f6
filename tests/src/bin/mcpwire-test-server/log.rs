//! `--log-file`: one JSON object per line, appended and flushed at once, so a
//! test can read the file while the server runs.
//!
//! Line shapes (`ms` = milliseconds since the server started; every line
//! also has the `pid` of the process that wrote it):
//! * `{"ms":N,"via":"stdio"|"http","message":{..}}`   a received JSON message
//!   (over HTTP with `"session":"<Mcp-Session-Id>"` when the request carried one)
//! * `{"ms":N,"via":"stdio"|"http","invalid":"<text>"}` a received non-JSON body/line
//! * `{"ms":N,"http":{"method":"POST","path":"/mcp","headers":{..}}}` an HTTP request
//!   (header names lower-cased), logged before its body
//! * `{"ms":N,"event":"started","unix_ms":T}` first, when the process
//!   starts (`unix_ms`: the wall clock, to compare processes)
//! * `{"ms":N,"event":"<what>",..}` server events: `stdin_eof`, `session_created`,
//!   `session_ended`, `rejected_before_initialized` (HTTP: a message or GET
//!   refused because its session's `notifications/initialized` had not arrived),
//!   and for tasks (`tasks.rs`): `task_created` (`taskId`, `tool`, `status`),
//!   `task_status` (`taskId`, `status`, `statusMessage`: every change), and
//!   `task_request` (`method`, `taskId`, `id`: every `tasks/*` request, which
//!   is also logged as a received message)

use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

pub struct Log {
    start: Instant,
    file: Option<Mutex<File>>,
}

impl Log {
    pub fn open(path: Option<&Path>) -> std::io::Result<Log> {
        let file = match path {
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        let log = Log {
            start: Instant::now(),
            file,
        };
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        log.event("started", json!({ "unix_ms": unix_ms }));
        Ok(log)
    }

    fn write(&self, mut line: Value) {
        let Some(file) = &self.file else { return };
        line["ms"] = json!(self.start.elapsed().as_millis() as u64);
        line["pid"] = json!(std::process::id());
        let mut text = line.to_string();
        text.push('\n');
        let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(text.as_bytes()).and_then(|()| f.flush()) {
            eprintln!("mcpwire-test-server: log file write failed: {e}");
        }
    }

    pub fn message(&self, via: &str, message: &Value) {
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.write(json!({"via": via, "message": message, "unix_ms": unix_ms}));
    }

    /// A message received over HTTP with the `Mcp-Session-Id` it carried.
    pub fn message_in(&self, via: &str, message: &Value, session: Option<&str>) {
        match session {
            Some(s) => self.write(json!({"via": via, "message": message, "session": s})),
            None => self.message(via, message),
        }
    }

    pub fn invalid(&self, via: &str, raw: &[u8]) {
        self.write(json!({"via": via, "invalid": String::from_utf8_lossy(raw)}));
    }

    pub fn http(&self, method: &str, path: &str, headers: &[(String, String)]) {
        let headers: serde_json::Map<String, Value> = headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        self.write(json!({"http": {"method": method, "path": path, "headers": headers}}));
    }

    pub fn event(&self, event: &str, extra: Value) {
        let mut line = json!({ "event": event });
        if let Value::Object(map) = extra {
            for (k, v) in map {
                line[k] = v;
            }
        }
        self.write(line);
    }
}
