//! HTTP exchanges on ureq worker threads: each [`HttpRequest`] the core
//! emits runs on a thread of its own with the connection's shared
//! (keep-alive) [`ureq::Agent`], which reports the head, the body in
//! chunks as they arrive (so SSE streams work) and the end or failure.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use mcpwire::transport::{HttpMethod, HttpRequest, ResponseHead};
use ureq::http;

use crate::owner::{Credits, Event, HttpEvent};

/// The agent of one connection: status codes are answers, not errors (the
/// core reads 4xx/5xx heads and bodies); no automatic redirects (the core
/// decides); no global timeout (SSE streams are long-lived; the core owns
/// the deadlines).
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .user_agent(concat!("mcpwire-blocking/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// Runs `req` on a worker thread.
pub(crate) fn start(
    agent: ureq::Agent,
    req: HttpRequest,
    tx: Sender<Event>,
    abort: Arc<AtomicBool>,
    credits: Arc<Credits>,
) {
    let exchange = req.exchange;
    let fail_tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("mcpwire-http".into())
        .spawn(move || run(&agent, req, &tx, &abort, &credits));
    if let Err(e) = spawned {
        let _ = fail_tx.send(Event::Http(
            exchange,
            HttpEvent::Failed(format!("cannot start an HTTP thread: {e}")),
        ));
    }
}

fn run(
    agent: &ureq::Agent,
    req: HttpRequest,
    tx: &Sender<Event>,
    abort: &AtomicBool,
    credits: &Credits,
) {
    let exchange = req.exchange;
    let send = |ev: HttpEvent| tx.send(Event::Http(exchange, ev)).is_ok();
    let response = match perform(agent, req) {
        Ok(r) => r,
        Err(e) => {
            send(HttpEvent::Failed(e));
            return;
        }
    };
    if abort.load(Ordering::SeqCst) {
        return;
    }
    let head = ResponseHead {
        status: response.status().as_u16(),
        reason: response
            .status()
            .canonical_reason()
            .unwrap_or_default()
            .to_string(),
        version: if response.version() == http::Version::HTTP_10 {
            0
        } else {
            1
        },
        headers: response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
            .collect(),
    };
    if !send(HttpEvent::Head(head)) {
        return;
    }
    let mut body = response.into_body().into_reader();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if abort.load(Ordering::SeqCst) {
            return; // dropping the reader closes the connection
        }
        match body.read(&mut buf) {
            Ok(0) => {
                send(HttpEvent::End);
                return;
            }
            Ok(n) => {
                if abort.load(Ordering::SeqCst) || !credits.acquire() {
                    return;
                }
                if !send(HttpEvent::Body(buf[..n].to_vec())) {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                send(HttpEvent::Failed(e.to_string()));
                return;
            }
        }
    }
}

fn perform(agent: &ureq::Agent, req: HttpRequest) -> Result<http::Response<ureq::Body>, String> {
    let mut builder = http::Request::builder()
        .method(req.method.as_str())
        .uri(req.url.to_string());
    for (name, value) in &req.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    match req.method {
        HttpMethod::Post => builder
            .body(req.body)
            .map_err(|e| e.to_string())
            .and_then(|r| agent.run(r).map_err(describe)),
        HttpMethod::Get | HttpMethod::Delete => builder
            .body(())
            .map_err(|e| e.to_string())
            .and_then(|r| agent.run(r).map_err(describe)),
    }
}

/// A short message for a ureq failure (e.g. `Connection refused (os
/// error 111)`).
fn describe(e: ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}
