//! Interop against a real tasks server: FastMCP with `fastmcp-tasks`
//! (SEP-2663, the 2026-07-28 tasks extension), over stdio and Streamable
//! HTTP. `call_tool` follows a task to its end (status as progress, the
//! server's question answered by the elicitation handler through
//! `tasks/update`, failures and tool errors as the spec says, a timeout
//! cancels the task on the server); the explicit API starts, reads, awaits
//! and cancels tasks.
//!
//! The server is `tests/interop/fastmcp_tasks_server.py`; its venv is
//! installed by `scripts/test` into `.deps/tasks-venv` (override with
//! `MCPWIRE_TASKS_PYTHON`). It offers no `subscriptions/listen`, so the
//! client polls (every 100 ms, the server's interval).

mod interop;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interop::*;
use mcpwire_tokio::types::{Task, TaskStarted, TaskStatus};
use mcpwire_tokio::{
    CallError, CallOptions, Client, ConnectOptions, Error, RequestError, ServerConfig,
};
use serde_json::json;
use tokio::process::Command;

/// Bound of one whole test (the server takes ~3 s to start).
const TEST_LIMIT: Duration = Duration::from_secs(60);

fn tasks_python() -> PathBuf {
    let python = std::env::var_os("MCPWIRE_TASKS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/tasks-venv/bin/python"));
    assert!(
        python.exists(),
        "interop test prerequisite missing: the fastmcp-tasks venv at {}.\n\
         Run `scripts/test` once (it installs it into .deps/tasks-venv), \
         or point MCPWIRE_TASKS_PYTHON at one.",
        python.display()
    );
    python
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/fastmcp_tasks_server.py")
}

fn options(asked: &Arc<AtomicUsize>) -> ConnectOptions {
    let asked = asked.clone();
    ConnectOptions::new()
        .client_info("mcpwire-interop", "0.0.0")
        .timeout(Duration::from_secs(20))
        .elicitation(move |params| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                assert_eq!(params["message"], "What is your name?", "{params}");
                Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
            }
        })
}

async fn stdio_client(asked: &Arc<AtomicUsize>) -> Client {
    let config = ServerConfig::stdio(tasks_python().to_string_lossy().into_owned())
        .arg(script().to_string_lossy().into_owned())
        .arg("stdio");
    let client = Client::connect_with(config, options(asked))
        .await
        .expect("connect to the FastMCP tasks server");
    assert_eq!(client.protocol_version(), "2026-07-28");
    client
}

/// What a progress observer saw: each message, with the task if any.
type Seen = Arc<Mutex<Vec<(String, Option<Task>)>>>;

/// Calls `slow_add` transparently and checks the status reached the
/// progress observer.
async fn follows_a_task(client: &Client) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let options = CallOptions::new().on_progress(move |p| {
        let task = p.task.as_ref().and_then(Task::from_value);
        s.lock()
            .unwrap()
            .push((p.message.clone().unwrap_or_default(), task));
    });
    let result = client
        .call_tool_with("slow_add", json!({"a": 2, "b": 3, "seconds": 0.6}), options)
        .await
        .expect("slow_add as a task");
    assert_eq!(ok_text("slow_add", &result), "5");
    assert_eq!(result.structured_content, Some(json!({"result": 5})));
    let seen = seen.lock().unwrap();
    let tasks: Vec<&Task> = seen.iter().filter_map(|(_, t)| t.as_ref()).collect();
    assert!(
        tasks.len() >= 2,
        "the status changes reach the progress observer: {seen:?}"
    );
    assert!(tasks.iter().all(|t| t.task_id == tasks[0].task_id));
    assert!(
        seen.iter().any(|(m, _)| m.contains("step")),
        "status messages: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_a_task_is_followed_to_its_result_and_its_question_answered() {
    within(TEST_LIMIT, "stdio tasks", async {
        let asked = Arc::new(AtomicUsize::new(0));
        let client = stdio_client(&asked).await;
        follows_a_task(&client).await;
        // The server asks during the task (input_required → tasks/update).
        let result = client
            .call_tool("ask_name", json!({}))
            .await
            .expect("ask_name");
        assert_eq!(ok_text("ask_name", &result), "hello Ada");
        assert_eq!(asked.load(Ordering::SeqCst), 1, "asked once");
        // A plain tool is answered at once.
        let result = client.call_tool("quick", json!({"x": 21})).await.unwrap();
        assert_eq!(ok_text("quick", &result), "42");
        client.close().await.unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_failures_are_a_tool_error_or_the_tasks_json_rpc_error() {
    within(TEST_LIMIT, "failures", async {
        let client = stdio_client(&Arc::default()).await;
        // An exception in the tool: completed with isError.
        let result = client.call_tool("failing", json!({})).await.unwrap();
        assert!(result.is_error(), "{result:?}");
        assert!(result.text().contains("deliberate failure"), "{result:?}");
        // A protocol error in the tool: the task failed with it.
        match client
            .call_tool("failing", json!({"protocol_error": true}))
            .await
        {
            Err(Error::Request(RequestError::Remote(e))) => {
                assert_eq!(e.code, -32000);
                assert!(e.message.contains("deliberate protocol error"), "{e:?}");
            }
            other => panic!("expected the task's error, got {other:?}"),
        }
        client.close().await.unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_a_call_that_times_out_cancels_its_task() {
    within(TEST_LIMIT, "timeout", async {
        let client = stdio_client(&Arc::default()).await;
        let id: Arc<Mutex<Option<String>>> = Arc::default();
        let i = id.clone();
        let options = CallOptions::new()
            .timeout(Duration::from_millis(700))
            .on_progress(move |p| {
                if let Some(t) = p.task.as_ref().and_then(Task::from_value) {
                    *i.lock().unwrap() = Some(t.task_id);
                }
            });
        let outcome = client
            .call_tool_with("slow_add", json!({"a": 1, "b": 1, "seconds": 10}), options)
            .await;
        assert!(
            matches!(
                outcome,
                Err(Error::Request(RequestError::Timeout { ms: 700 }))
            ),
            "{outcome:?}"
        );
        let task_id = id.lock().unwrap().clone().expect("the task was seen");
        // tasks/cancel went out with the timeout: the server says cancelled.
        let mut status = TaskStatus::Working;
        for _ in 0..40 {
            status = client.get_task(&task_id).await.unwrap().status;
            if status == TaskStatus::Cancelled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(status, TaskStatus::Cancelled);
        client.close().await.unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_the_explicit_api_starts_reads_awaits_and_cancels_tasks() {
    within(TEST_LIMIT, "explicit API", async {
        let client = stdio_client(&Arc::default()).await;
        let args = json!({"a": 20, "b": 22, "seconds": 0.3});
        let TaskStarted::Task(task) = client
            .start_tool_task("slow_add", args, CallOptions::new())
            .await
            .unwrap()
        else {
            panic!("slow_add becomes a task");
        };
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.poll_interval_ms, Some(100));
        let got = client.get_task(&task.task_id).await.unwrap();
        assert_eq!(got.task_id, task.task_id);
        let result = client
            .task_result(&task.task_id, CallOptions::new())
            .await
            .unwrap();
        assert_eq!(ok_text("task_result", &result), "42");
        // A plain tool is answered at once, even when started as a task.
        let started = client
            .start_tool_task("quick", json!({"x": 2}), CallOptions::new())
            .await
            .unwrap();
        assert!(
            matches!(started, TaskStarted::Done(ref r) if r.text() == "4"),
            "{started:?}"
        );
        // Cancel a long one.
        let TaskStarted::Task(long) = client
            .start_tool_task(
                "slow_add",
                json!({"a": 1, "b": 2, "seconds": 10}),
                CallOptions::new(),
            )
            .await
            .unwrap()
        else {
            panic!("a task");
        };
        client.cancel_task(&long.task_id).await.unwrap();
        let outcome = client.task_result(&long.task_id, CallOptions::new()).await;
        assert!(
            matches!(outcome, Err(Error::Request(RequestError::Cancelled { .. }))),
            "{outcome:?}"
        );
        // No task list in this era: refused before anything is sent.
        match client.list_tasks().await {
            Err(Error::Call(CallError::NotSupported { capability, .. })) => {
                assert_eq!(capability, "tasks.list")
            }
            other => panic!("{other:?}"),
        }
        // An unknown id is the server's -32602.
        match client.get_task("nope").await {
            Err(Error::Request(RequestError::Remote(e))) => assert_eq!(e.code, -32602),
            other => panic!("{other:?}"),
        }
        client.close().await.unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_tasks_over_streamable_http() {
    within(TEST_LIMIT, "HTTP tasks", async {
        let server = spawn_http_server("FastMCP tasks server", |port| {
            let mut cmd = Command::new(tasks_python());
            cmd.arg(script()).arg("http").arg(port.to_string());
            cmd
        })
        .await;
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        let asked = Arc::new(AtomicUsize::new(0));
        let client = Client::connect_with(ServerConfig::http(&url), options(&asked))
            .await
            .expect("connect over HTTP");
        assert_eq!(client.protocol_version(), "2026-07-28");
        follows_a_task(&client).await;
        let result = client
            .call_tool("ask_name", json!({}))
            .await
            .expect("ask_name");
        assert_eq!(ok_text("ask_name", &result), "hello Ada");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        client.close().await.unwrap();
        server.kill().await;
    })
    .await
}
