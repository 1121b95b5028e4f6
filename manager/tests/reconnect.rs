//! Real subprocess servers that crash on demand: the manager reconnects,
//! re-lists tools, and calls made during the outage succeed after the
//! reconnect — or fail clearly once it gives up.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use mcpwire_manager::{
    CallOptions, Error, ManagerOptions, RetryPolicy, ServerConfig, ServerEntry, ServerState,
};
use serde_json::json;

fn quick_retry(max_attempts: u32, initial_ms: u64) -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(initial_ms),
        max_attempts,
        jitter: 0.0,
        ..RetryPolicy::default()
    }
}

fn options<F>(retry: RetryPolicy) -> ManagerOptions<F> {
    ManagerOptions::new().no_cache().retry(retry).seed(7)
}

/// Records every state label `name` goes through.
fn record_states<M: Front>(m: &M, name: &'static str) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (m, s) = (m.clone(), seen.clone());
    let mut changes = m.changes();
    std::thread::spawn(move || {
        while changes.wait(None).is_ok() {
            let label = status_of(&m, name).state.label().to_string();
            let mut v = s.lock().unwrap();
            if v.last() != Some(&label) {
                v.push(label);
            }
        }
    });
    seen
}

fn crash_reconnects_relists_and_a_call_during_the_outage_succeeds<M: Front>() {
    let dir = TempDir::new("crash");
    let log = dir.path().join("server.log");
    let m = M::start(
        [ServerEntry::new("ts", server_with_log(&log))],
        options(quick_retry(3, 200)),
    );
    assert!(is_connected(&status_of(&m, "ts")), "{:?}", m.status());
    let names: Vec<String> = m.tools().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"mcp__ts__echo".to_string()), "{names:?}");
    assert!(names.contains(&"mcp__ts__crash".to_string()), "{names:?}");
    assert_eq!(tools_list_count(&log), 1);
    let states = record_states(&m, "ts");

    // The crash call itself cannot succeed: the server dies answering it.
    let err = m
        .call(
            "mcp__ts__crash",
            json!({"code": 3, "message": "boom"}),
            CallOptions::new().timeout(Duration::from_secs(5)),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Client { .. }), "{err}");

    // Made during the outage: waits for the reconnect, then succeeds.
    let out = m
        .call(
            "mcp__ts__echo",
            json!({"message": "after the crash"}),
            CallOptions::new().timeout(Duration::from_secs(10)),
        )
        .unwrap();
    assert_eq!(out.text(), "Echo: after the crash");

    let st = status_of(&m, "ts");
    assert!(is_connected(&st), "{st:?}");
    assert!(
        st.last_error.as_deref().unwrap_or("").contains("status 3"),
        "the close reason is kept: {st:?}"
    );
    assert_eq!(
        tools_list_count(&log),
        2,
        "tools re-listed after reconnecting"
    );
    assert!(!st.tools_from_cache && st.tools > 10);
    assert!(m.tools().iter().all(|t| !t.deferred));
    eventually(
        Duration::from_secs(20),
        "reconnecting, then connected",
        || {
            let seen = states.lock().unwrap();
            seen.windows(2).any(|w| w == ["reconnecting", "connected"])
        },
    );
    m.close();
}

#[cfg(unix)]
fn gives_up_after_max_attempts_and_waiting_calls_fail_clearly<M: Front>() {
    let dir = TempDir::new("giveup");
    let marker = dir.path().join("started-once");
    // Runs the test server once; every restart exits at once with 9.
    let script =
        r#"if [ -e "$0" ]; then echo "no second life" >&2; exit 9; fi; : > "$0"; exec "$1""#;
    let config =
        ServerConfig::stdio("sh").args(["-c", script, &marker.to_string_lossy(), &test_server()]);
    let m = M::start(
        [ServerEntry::new("once", config)],
        options(quick_retry(3, 50)),
    );
    assert!(is_connected(&status_of(&m, "once")), "{:?}", m.status());
    let states = record_states(&m, "once");

    let _ = m.call("mcp__once__crash", json!({"code": 1}), CallOptions::new());
    let started = Instant::now();
    let err = m
        .call(
            "mcp__once__echo",
            json!({"message": "never"}),
            CallOptions::new().timeout(Duration::from_secs(60)),
        )
        .unwrap_err();
    let text = err.to_string();
    let Error::Failed { server, error } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(server, "once");
    assert!(
        error.contains("gave up after 3 reconnect attempts"),
        "{text}"
    );
    assert!(error.contains("9"), "the last error is quoted: {text}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "failed before the call's timeout"
    );
    let st = status_of(&m, "once");
    assert!(matches!(st.state, ServerState::Failed { .. }), "{st:?}");
    assert!(m.tools().is_empty(), "a failed server offers no tools");
    eventually(Duration::from_secs(20), "the recorder saw `failed`", || {
        states.lock().unwrap().last().map(String::as_str) == Some("failed")
    });
    let seen = states.lock().unwrap().clone();
    assert!(seen.contains(&"reconnecting".to_string()), "{seen:?}");
    m.close();
}

fn calls_while_reconnecting_wait_their_timeout_then_say_reconnecting<M: Front>() {
    let dir = TempDir::new("wait");
    let log = dir.path().join("server.log");
    // A long first backoff keeps the server in `reconnecting`.
    let m = M::start(
        [ServerEntry::new("ts", server_with_log(&log))],
        options(quick_retry(2, 60_000)),
    );
    let _ = m.call("mcp__ts__crash", json!({}), CallOptions::new());
    eventually(Duration::from_secs(20), "reconnecting", || {
        matches!(status_of(&m, "ts").state, ServerState::Reconnecting { .. })
    });
    let st = status_of(&m, "ts");
    assert!(
        st.describe(Instant::now())
            .starts_with("reconnecting (attempt 1 of 2, next in"),
        "{}",
        st.describe(Instant::now())
    );
    assert!(
        m.tools().iter().all(|t| t.deferred) && !m.tools().is_empty(),
        "a reconnecting server's tools stay, deferred"
    );

    let started = Instant::now();
    let err = m
        .call(
            "mcp__ts__echo",
            json!({"message": "x"}),
            CallOptions::new().timeout(Duration::from_millis(300)),
        )
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(err.is_timeout(), "{err}");
    assert!(
        matches!(err, Error::Reconnecting { attempt: 1, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("is reconnecting (attempt 1 of 2"), "{text}");

    let err = m
        .call(
            "mcp__ts__echo",
            json!({"message": "x"}),
            CallOptions::new().wait_for_connection(false),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Reconnecting { .. }), "{err:?}");

    // Closing does not wait for the backoff.
    let t = Instant::now();
    m.close();
    // Not the 60 s backoff.
    assert!(t.elapsed() < Duration::from_secs(20));
    assert!(matches!(
        m.call("mcp__ts__echo", json!({"message": "x"}), CallOptions::new()),
        Err(Error::Closed)
    ));
    assert_eq!(status_of(&m, "ts").state, ServerState::Closed);
}

fn tools_list_changed_relists_that_server<M: Front>() {
    let dir = TempDir::new("listchanged");
    let log = dir.path().join("server.log");
    let cache = dir.path().join("cache/tools.json");
    let m = M::start(
        [ServerEntry::new("ts", server_with_log(&log))],
        ManagerOptions::new().cache_file(&cache),
    );
    assert_eq!(tools_list_count(&log), 1);
    eventually(Duration::from_secs(20), "the cache written", || {
        cache.is_file()
    });
    std::fs::remove_file(&cache).unwrap();
    // The server sends notifications/tools/list_changed before answering.
    m.call(
        "mcp__ts__notify_first",
        json!({"count": 1}),
        CallOptions::new(),
    )
    .unwrap();
    eventually(Duration::from_secs(20), "a second tools/list", || {
        tools_list_count(&log) == 2
    });
    eventually(Duration::from_secs(20), "the cache written again", || {
        std::fs::read_to_string(&cache).is_ok_and(|t| t.contains("notify_first"))
    });
    m.close();
}

fn unknown_tools_and_cancel_while_waiting<M: Front>() {
    let m = M::start(
        [ServerEntry::new("ts", ServerConfig::stdio(test_server()))],
        options(quick_retry(2, 60_000)),
    );
    assert!(matches!(
        m.call("mcp__ts__nope", json!({}), CallOptions::new()),
        Err(Error::UnknownTool(_))
    ));
    let _ = m.call("mcp__ts__crash", json!({}), CallOptions::new());
    let token = mcpwire_manager::CancelToken::new();
    let t2 = token.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        t2.cancel();
    });
    let err = m
        .call(
            "mcp__ts__echo",
            json!({"message": "x"}),
            CallOptions::new()
                .timeout(Duration::from_secs(10))
                .cancel_token(token),
        )
        .unwrap_err();
    assert!(
        err.client_error().is_some_and(|e| e.is_cancelled()),
        "{err:?}"
    );
    m.close();
}

on_every_front_end!(
    crash_reconnects_relists_and_a_call_during_the_outage_succeeds,
    #[cfg(unix)]
    gives_up_after_max_attempts_and_waiting_calls_fail_clearly,
    calls_while_reconnecting_wait_their_timeout_then_say_reconnecting,
    tools_list_changed_relists_that_server,
    unknown_tools_and_cancel_while_waiting,
);
