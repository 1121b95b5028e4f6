//! Tasks against the test server, in both eras: 2025-11-25 experimental
//! tasks (a `required` tool is called as a task, `tasks/result` carries
//! the server's question) and the 2026-07-28 tasks extension (the server
//! decides; questions come in `tasks/get` and go back with
//! `tasks/update`). `call_tool` follows a task to its end; the explicit
//! API starts, reads, awaits, lists and cancels tasks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_adapter::methods::ServerRequestKind;
use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::types::{Task, TaskStarted, TaskStatus};
use mcpwire_adapter::{
    CallError, CallOptions, CancelToken, Error, Handler, RequestError, ServerConfig,
};
use serde_json::{json, Value};

use super::support::{http_server_in, log_lines, stdio_in, temp_log, Era};
use super::Adapter;

/// The task seen by a progress observer: (message, task id) of each
/// status change.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn observed(seen: &Seen) -> CallOptions {
    let s = seen.clone();
    CallOptions::new().on_progress(move |p| {
        if let Some(t) = p.task.as_ref().and_then(Task::from_value) {
            let message = p.message.clone().unwrap_or_default();
            s.lock().unwrap().push((message, t.task_id));
        }
    })
}

/// Connects with an elicitation handler that answers `name: Ada` and
/// counts the questions.
async fn connect_asking<A: Adapter>(config: ServerConfig, asked: &Arc<AtomicUsize>) -> A {
    let count = asked.clone();
    let elicit = Handler::Blocking(Arc::new(move |params: Value| {
        count.fetch_add(1, Ordering::SeqCst);
        assert_eq!(params["mode"], "form", "{params}");
        Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
    }));
    let options = ConnectOptions::<A::Flavor>::new().handler(ServerRequestKind::Elicit, elicit);
    A::connect_with(config, options).await.unwrap()
}

/// `task_required` through `call_tool`: a task in both eras (2025-11-25:
/// the list says it is required; 2026-07-28: the server makes it one),
/// followed to its result with each status change as progress.
async fn follows_a_task<A: Adapter>(client: &A) {
    client.list_tools().await.unwrap();
    let seen = Seen::default();
    let r = client
        .call_tool_with("task_required", json!({"ms": 300}), observed(&seen))
        .await
        .unwrap();
    assert_eq!(r.text(), "required task done");
    let seen = seen.lock().unwrap();
    assert!(
        !seen.is_empty(),
        "status changes reach the progress observer"
    );
    assert!(seen.iter().all(|(_, id)| *id == seen[0].1));
    assert!(seen.iter().any(|(m, _)| m.contains("working")), "{seen:?}");
}

pub async fn stdio_a_task_is_followed_to_its_end<A: Adapter>(era: Era) {
    let log = temp_log("tasks");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(config).await.unwrap();
    follows_a_task(&client).await;
    // An optional tool is not a task in 2025-11-25 unless asked for; the
    // 2026-07-28 server makes it one.
    let r = client
        .call_tool("task_sleep", json!({"ms": 60, "steps": 2}))
        .await
        .unwrap();
    assert_eq!(r.text(), "slept 60 ms");
    // A tool error is a completed task with isError; a JSON-RPC failure
    // is the task's error.
    let r = client
        .call_tool("task_required", json!({"ms": 10}))
        .await
        .unwrap();
    assert!(!r.is_error());
    client.close().await.unwrap();
    let created: Vec<Value> = log_lines(&log)
        .into_iter()
        .filter(|v| v["event"] == "task_created")
        .collect();
    let tools: Vec<&str> = created.iter().filter_map(|v| v["tool"].as_str()).collect();
    match era {
        Era::Legacy => assert_eq!(tools, ["task_required", "task_required"]),
        Era::Modern => assert_eq!(tools, ["task_required", "task_sleep", "task_required"]),
    }
}

/// `call_tool` of a tool that must run as a task, with no `list_tools`
/// first: 2025-11-25 refuses the plain call (-32601) and the connection
/// sends it again as a task; 2026-07-28 makes it one itself. Progress and
/// the result reach the one call; the next call is a task at once.
pub async fn stdio_a_required_task_tool_works_without_a_listing<A: Adapter>(era: Era) {
    let log = temp_log("task-unlisted");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(config).await.unwrap();
    for _ in 0..2 {
        let seen = Seen::default();
        let r = client
            .call_tool_with("task_required", json!({"ms": 100}), observed(&seen))
            .await
            .unwrap();
        assert_eq!(r.text(), "required task done");
        assert!(!seen.lock().unwrap().is_empty(), "status as progress");
    }
    client.close().await.unwrap();
    let calls: Vec<bool> = log_lines(&log)
        .into_iter()
        .filter(|v| v["message"]["method"] == "tools/call")
        .map(|v| v["message"]["params"].get("task").is_some())
        .collect();
    match era {
        // Plain (refused), as a task; then as a task at once.
        Era::Legacy => assert_eq!(calls, [false, true, true]),
        Era::Modern => assert_eq!(calls, [false, false]),
    }
}

pub async fn stdio_a_task_asks_and_is_answered<A: Adapter>(era: Era) {
    let asked = Arc::new(AtomicUsize::new(0));
    let client: A = connect_asking(stdio_in(era, &[]), &asked).await;
    client.list_tools().await.unwrap();
    // Started as a task (2025-11-25: the tool allows one), then awaited:
    // the question comes on tasks/result (2025) or in tasks/get (2026).
    let started = client
        .start_tool_task("task_ask", json!({}), CallOptions::new())
        .await
        .unwrap();
    let TaskStarted::Task(task) = started else {
        panic!("task_ask becomes a task: {started:?}")
    };
    let r = client
        .task_result(&task.task_id, CallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "hello Ada");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    if era == Era::Modern {
        // call_tool alone: the server makes it a task and asks.
        let r = client.call_tool("task_ask", json!({})).await.unwrap();
        assert_eq!(r.text(), "hello Ada");
        assert_eq!(asked.load(Ordering::SeqCst), 2, "each question once");
    }
    client.close().await.unwrap();
}

/// The task ids the server got `tasks/cancel` for.
fn cancels_in(log: &std::path::Path) -> Vec<String> {
    log_lines(log)
        .into_iter()
        .filter(|v| v["event"] == "task_request" && v["method"] == "tasks/cancel")
        .filter_map(|v| v["taskId"].as_str().map(str::to_owned))
        .collect()
}

pub async fn stdio_a_task_outlived_or_cancelled_is_cancelled_on_the_server<A: Adapter>(era: Era) {
    let log = temp_log("task-cancel");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(config).await.unwrap();
    client.list_tools().await.unwrap();
    // The call's timeout: tasks/cancel, then Timeout.
    let seen = Seen::default();
    let options = observed(&seen).timeout(Duration::from_millis(400));
    let e = client
        .call_tool_with("task_required", json!({"ms": 10_000}), options)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Request(RequestError::Timeout { ms: 400 })),
        "{e:?}"
    );
    let first = seen.lock().unwrap()[0].1.clone();
    // The token: tasks/cancel, then Cancelled.
    let token = CancelToken::new();
    let seen = Seen::default();
    let options = observed(&seen).cancel_token(token.clone());
    let call = client.call_tool_with("task_required", json!({"ms": 10_000}), options);
    let cancel = async {
        A::sleep(Duration::from_millis(300)).await;
        token.cancel();
    };
    let (outcome, ()) = futures_lite::future::zip(call, cancel).await;
    let e = outcome.unwrap_err();
    assert!(
        matches!(e, Error::Request(RequestError::Cancelled { .. })),
        "{e:?}"
    );
    let second = seen.lock().unwrap()[0].1.clone();
    let mut ids = vec![first, second];
    if A::CANCELS_ON_DROP {
        // A dropped call: tasks/cancel as well.
        let seen = Seen::default();
        let call = client.call_tool_with("task_required", json!({"ms": 10_000}), observed(&seen));
        assert!(A::timeout(Duration::from_millis(400), call).await.is_none());
        ids.push(seen.lock().unwrap()[0].1.clone());
        for _ in 0..100 {
            if cancels_in(&log).len() == ids.len() {
                break;
            }
            A::sleep(Duration::from_millis(20)).await;
        }
    }
    // A task past its ttl (kept 500 ms, still working): nothing will end
    // it, so it is given up a second later and cancelled.
    let seen = Seen::default();
    let args = json!({"ms": 10_000, "ttl_ms": 500});
    let e = client
        .call_tool_with("task_required", args, observed(&seen))
        .await
        .unwrap_err();
    match &e {
        Error::Request(RequestError::TaskExpired { task_id, message }) => {
            assert_eq!(*task_id, seen.lock().unwrap()[0].1);
            assert!(message.contains("ttl"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    ids.push(seen.lock().unwrap()[0].1.clone());
    for id in &ids {
        let status = client.get_task(id).await.unwrap().status;
        assert_eq!(status, TaskStatus::Cancelled, "task {id}");
    }
    client.close().await.unwrap();
    assert_eq!(cancels_in(&log), ids);
    // Never notifications/cancelled for the call that became a task
    // (the replaced subscriptions/listen and a dropped poll may get one).
    let lines = log_lines(&log);
    let calls: Vec<&Value> = lines
        .iter()
        .filter(|v| v["message"]["method"] == "tools/call")
        .map(|v| &v["message"]["id"])
        .collect();
    let cancelled: Vec<&Value> = lines
        .iter()
        .filter(|v| v["message"]["method"] == "notifications/cancelled")
        .map(|v| &v["message"]["params"]["requestId"])
        .collect();
    assert!(
        !cancelled.iter().any(|id| calls.contains(id)),
        "calls {calls:?}, cancelled {cancelled:?}"
    );
}

pub async fn stdio_the_explicit_task_api<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    client.list_tools().await.unwrap();
    let start = |outcome: &str| {
        client.start_tool_task(
            "task_sleep",
            json!({"ms": 100, "steps": 2, "outcome": outcome}),
            CallOptions::new().task_ttl(Duration::from_secs(30)),
        )
    };
    let TaskStarted::Task(ok) = start("ok").await.unwrap() else {
        panic!("a task")
    };
    assert_eq!(ok.status, TaskStatus::Working);
    assert_eq!(ok.poll_interval_ms, Some(50));
    if era == Era::Legacy {
        assert_eq!(ok.ttl_ms, Some(30_000), "the ttl asked for");
    }
    let got = client.get_task(&ok.task_id).await.unwrap();
    assert_eq!(got.task_id, ok.task_id);
    let r = client
        .task_result(&ok.task_id, CallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "slept 100 ms");
    assert_eq!(r.structured_content, Some(json!({"ms": 100})));
    // A task's result is checked against its tool's outputSchema, awaited
    // later as much as followed by call_tool.
    let TaskStarted::Task(bad) = start("bad_output").await.unwrap() else {
        panic!("a task")
    };
    match client.task_result(&bad.task_id, CallOptions::new()).await {
        Err(Error::StructuredOutput { tool, problem }) => {
            assert_eq!(tool, "task_sleep");
            assert!(problem.to_string().contains("/ms"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    match client
        .call_tool(
            "task_sleep",
            json!({"ms": 20, "steps": 1, "outcome": "bad_output"}),
        )
        .await
    {
        Err(Error::StructuredOutput { tool, .. }) => assert_eq!(tool, "task_sleep"),
        other => panic!("{other:?}"),
    }
    let TaskStarted::Task(tool_error) = start("tool_error").await.unwrap() else {
        panic!("a task")
    };
    let r = client
        .task_result(&tool_error.task_id, CallOptions::new())
        .await
        .unwrap();
    assert!(r.is_error(), "{r:?}");
    let TaskStarted::Task(fail) = start("fail").await.unwrap() else {
        panic!("a task")
    };
    match client.task_result(&fail.task_id, CallOptions::new()).await {
        Err(Error::Request(RequestError::Remote(e))) => {
            assert_eq!(
                (e.code, e.message.as_str()),
                (-32603, "task failed on purpose")
            )
        }
        other => panic!("{other:?}"),
    }
    // A long one, cancelled by the caller.
    let TaskStarted::Task(long) = client
        .start_tool_task("task_sleep", json!({"ms": 10_000}), CallOptions::new())
        .await
        .unwrap()
    else {
        panic!("a task")
    };
    client.cancel_task(&long.task_id).await.unwrap();
    let e = client
        .task_result(&long.task_id, CallOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Request(RequestError::Cancelled { .. })
                | Error::Request(RequestError::Remote(_))
        ),
        "{e:?}"
    );
    // A tool without tasks answers at once.
    let started = client
        .start_tool_task("echo", json!({"message": "now"}), CallOptions::new())
        .await
        .unwrap();
    assert!(
        matches!(&started, TaskStarted::Done(r) if r.text() == "Echo: now"),
        "{started:?}"
    );
    match era {
        Era::Legacy => {
            let tasks = client.list_tasks().await.unwrap();
            let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
            for t in [&ok, &tool_error, &fail, &long] {
                assert!(ids.contains(&t.task_id.as_str()), "{ids:?}");
            }
        }
        Era::Modern => match client.list_tasks().await {
            Err(Error::Call(CallError::NotSupported { capability, .. })) => {
                assert_eq!(capability, "tasks.list")
            }
            other => panic!("{other:?}"),
        },
    }
    match client.get_task("no-such-task").await {
        Err(Error::Request(RequestError::Remote(e))) => assert_eq!(e.code, -32602),
        other => panic!("{other:?}"),
    }
    client.close().await.unwrap();
}

pub async fn http_a_task_is_followed_to_its_end<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &[]);
    let asked = Arc::new(AtomicUsize::new(0));
    let client: A = connect_asking(ServerConfig::http(&server.url), &asked).await;
    follows_a_task(&client).await;
    let TaskStarted::Task(task) = client
        .start_tool_task("task_ask", json!({}), CallOptions::new())
        .await
        .unwrap()
    else {
        panic!("a task")
    };
    let r = client
        .task_result(&task.task_id, CallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "hello Ada");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    client.close().await.unwrap();
}
