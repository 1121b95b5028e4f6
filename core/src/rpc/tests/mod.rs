//! Unit tests of the engine: every completion path, the exact JSON sent,
//! server requests, diagnostics and limits.

use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::*;

mod deadlines;
mod faults;
mod limits;
mod progress;
mod requests;
mod server;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct H {
    e: Engine,
    t0: Instant,
}

impl H {
    fn new(config: EngineConfig) -> Self {
        H {
            e: Engine::new(config),
            t0: Instant::now(),
        }
    }

    fn at(&self, ms_: u64) -> Instant {
        self.t0 + ms(ms_)
    }

    fn req(&mut self, method: &str, opts: RequestOptions) -> u64 {
        let id = self.e.request(self.t0, method, None, opts).unwrap();
        let sent = self.sends();
        assert_eq!(sent.len(), 1);
        id
    }

    fn recv(&mut self, at: u64, text: &str) {
        self.e.handle_message(self.at(at), text.as_bytes());
    }

    fn drain(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.e.poll_output()).collect()
    }

    fn sends(&mut self) -> Vec<String> {
        self.drain()
            .into_iter()
            .map(|o| match o {
                Output::Send { bytes, .. } => String::from_utf8(bytes).unwrap(),
                other => panic!("expected Send, got {other:?}"),
            })
            .collect()
    }
}

fn complete(out: &Output) -> (u64, &Result<Box<RawValue>, RequestError>) {
    match out {
        Output::Complete { id, outcome } => (*id, outcome),
        other => panic!("expected Complete, got {other:?}"),
    }
}

fn failed(out: &Output) -> (u64, &RequestError) {
    let (id, outcome) = complete(out);
    (id, outcome.as_ref().expect_err("expected a failure"))
}

fn send_text(out: &Output) -> &str {
    match out {
        Output::Send { bytes, .. } => std::str::from_utf8(bytes).unwrap(),
        other => panic!("expected Send, got {other:?}"),
    }
}
