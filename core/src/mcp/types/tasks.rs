//! Tasks: a tool call the server runs in the background, followed by
//! polling. Two protocol eras, one shape here:
//!
//! - 2025-11-25 (experimental tasks): the server declares
//!   `capabilities.tasks.requests.tools.call` and each tool's
//!   `execution.taskSupport`; the client asks for a task with
//!   `params.task: {ttl}` and gets `{task: {…}}`; `tasks/get`, `tasks/result`
//!   (blocks until the end, carries the server's questions), `tasks/list`,
//!   `tasks/cancel`, `notifications/tasks/status`. Durations are `ttl` and
//!   `pollInterval`.
//! - 2026-07-28 (the `io.modelcontextprotocol/tasks` extension, SEP-2663):
//!   the client declares the extension in each request's capabilities and
//!   the server decides: a `tools/call` result with `resultType: "task"` is
//!   the task itself (flat); `tasks/get` carries the final `result` or
//!   `error` inline, or the `inputRequests` answered with `tasks/update`;
//!   `tasks/cancel`; `notifications/tasks` on `subscriptions/listen`.
//!   Durations are `ttlMs` and `pollIntervalMs`.
//!
//! [`Task`] reads both (`ttl` and `ttlMs` alike); [`TaskStarted`] tells a
//! created task from a result given at once.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{CallToolResult, Extra, ServerCapabilities, Tool};

/// The extension's identifier (2026-07-28), in `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `_meta` key tying a message to its task (`{taskId}`).
pub const RELATED_TASK_META_KEY: &str = "io.modelcontextprotocol/related-task";

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client to answer the server's questions.
    InputRequired,
    /// Done: the result is there (a tool error too).
    Completed,
    /// Ended by a JSON-RPC error.
    Failed,
    /// Cancelled before it ended.
    Cancelled,
    /// A status this crate does not know (treated as still running).
    #[serde(other)]
    Unknown,
}

impl TaskStatus {
    /// Whether the task will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task's state, as `tasks/get`, a task's creation and the status
/// notifications give it (either era).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The server's id of the task.
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What the server says about it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_at: Option<String>,
    /// How long the server keeps it from its creation, in ms (`ttl` in
    /// 2025-11-25); `None`: unlimited or not said.
    #[serde(default, alias = "ttl", skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// How often the server would like to be polled, in ms
    /// (`pollInterval` in 2025-11-25).
    #[serde(
        default,
        alias = "pollInterval",
        skip_serializing_if = "Option::is_none"
    )]
    pub poll_interval_ms: Option<u64>,
    /// The rest (2026-07-28 `tasks/get`: `result`, `error`,
    /// `inputRequests`; `resultType`; `_meta`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Task {
    /// Reads a task from a `tasks/get` result, a status notification's
    /// params, or a created task (`{task: {…}}` or flat).
    pub fn from_value(value: &Value) -> Option<Task> {
        let inner = value.get("task").filter(|t| t.is_object()).unwrap_or(value);
        serde_json::from_value(inner.clone()).ok()
    }

    /// The final result inlined by a 2026-07-28 `tasks/get` (completed).
    pub fn inline_result(&self) -> Option<&Value> {
        self.extra.get("result").filter(|r| r.is_object())
    }

    /// The JSON-RPC error inlined by a 2026-07-28 `tasks/get` (failed).
    pub fn inline_error(&self) -> Option<&Value> {
        self.extra.get("error").filter(|e| e.is_object())
    }

    /// The questions of a 2026-07-28 `input_required` task, by key.
    pub fn input_requests(&self) -> Option<&Map<String, Value>> {
        self.extra.get("inputRequests").and_then(Value::as_object)
    }

    /// `status` and `statusMessage` as one line (`working: step 1/3`).
    pub fn describe(&self) -> String {
        match &self.status_message {
            Some(m) if !m.is_empty() => format!("{}: {m}", self.status),
            _ => self.status.to_string(),
        }
    }
}

/// What a `tools/call` that may become a task gave back.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum TaskStarted {
    /// The server runs it as a task: follow it by its id.
    Task(Task),
    /// The server answered at once.
    Done(CallToolResult),
}

impl TaskStarted {
    /// Tells a created task (`{task: {…}}` in 2025-11-25, `resultType:
    /// "task"` in 2026-07-28) from a plain result.
    pub fn from_result(value: Value) -> Result<TaskStarted, serde_json::Error> {
        let is_task = value.get("resultType").and_then(Value::as_str) == Some("task")
            || value.get("task").is_some_and(|t| t.get("taskId").is_some());
        if is_task {
            let inner = value.get("task").cloned().unwrap_or(value);
            return serde_json::from_value(inner).map(TaskStarted::Task);
        }
        serde_json::from_value(value).map(TaskStarted::Done)
    }
}

/// One page of `tasks/list` (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// The tasks on this page.
    pub tasks: Vec<Task>,
    /// Cursor of the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool's `execution.taskSupport` (2025-11-25).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Must be called as a task.
    Required,
    /// May be called as a task.
    Optional,
    /// Never called as a task (also when not said).
    #[default]
    Forbidden,
}

impl TaskSupport {
    fn parse(s: &str) -> TaskSupport {
        match s {
            "required" => TaskSupport::Required,
            "optional" => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        }
    }

    /// The support declared in a tool's JSON (`execution.taskSupport`).
    pub fn of_value(tool: &Value) -> TaskSupport {
        tool.get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            .map_or(TaskSupport::Forbidden, TaskSupport::parse)
    }
}

impl Tool {
    /// Its `execution.taskSupport` (2025-11-25); forbidden when not said.
    pub fn task_support(&self) -> TaskSupport {
        self.extra
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            .map_or(TaskSupport::Forbidden, TaskSupport::parse)
    }
}

impl ServerCapabilities {
    /// Whether the server takes task-augmented `tools/call`
    /// (`tasks.requests.tools.call`, 2025-11-25).
    pub fn tasks_for_tool_calls(&self) -> bool {
        self.extra
            .get("tasks")
            .and_then(|t| t.get("requests"))
            .and_then(|r| r.get("tools"))
            .and_then(|t| t.get("call"))
            .is_some()
    }

    /// Whether the server lists tasks (`tasks.list`, 2025-11-25).
    pub fn tasks_list(&self) -> bool {
        self.extra
            .get("tasks")
            .and_then(|t| t.get("list"))
            .is_some()
    }

    /// Whether the server cancels tasks (`tasks.cancel`, 2025-11-25).
    pub fn tasks_cancel(&self) -> bool {
        self.extra
            .get("tasks")
            .and_then(|t| t.get("cancel"))
            .is_some()
    }

    /// Whether the server declares extension `id` (`extensions`, 2026-07-28).
    pub fn has_extension(&self, id: &str) -> bool {
        self.extra
            .get("extensions")
            .and_then(|e| e.get(id))
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_eras_read_alike() {
        let old = json!({"task": {"taskId": "t1", "status": "working", "ttl": 60000,
            "pollInterval": 500, "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:30:00Z"}});
        let new = json!({"resultType": "task", "taskId": "t1", "status": "working",
            "ttlMs": 60000, "pollIntervalMs": 500, "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:30:00Z"});
        for v in [old, new] {
            let TaskStarted::Task(t) = TaskStarted::from_result(v).unwrap() else {
                panic!("a task")
            };
            assert_eq!(t.task_id, "t1");
            assert_eq!(t.status, TaskStatus::Working);
            assert_eq!(t.ttl_ms, Some(60000));
            assert_eq!(t.poll_interval_ms, Some(500));
        }
        let done = TaskStarted::from_result(json!({"content": [], "isError": false})).unwrap();
        assert!(matches!(done, TaskStarted::Done(_)));
        // A tool result that merely mentions a task is not one.
        let r = json!({"content": [], "structuredContent": {"task": "x"}});
        assert!(matches!(
            TaskStarted::from_result(r).unwrap(),
            TaskStarted::Done(_)
        ));
    }

    #[test]
    fn statuses_and_inline_fields() {
        let t: Task = serde_json::from_value(json!({"taskId": "a", "status": "completed",
            "ttlMs": null, "result": {"content": []}, "resultType": "complete"}))
        .unwrap();
        assert!(t.status.is_terminal());
        assert!(t.inline_result().is_some());
        assert_eq!(t.ttl_ms, None);
        let t: Task = serde_json::from_value(json!({"taskId": "a", "status": "paused"})).unwrap();
        assert_eq!(t.status, TaskStatus::Unknown);
        assert!(!t.status.is_terminal());
        let t: Task = serde_json::from_value(json!({"taskId": "a", "status": "input_required",
            "statusMessage": "waiting", "inputRequests": {"k": {"method": "elicitation/create"}}}))
        .unwrap();
        assert_eq!(t.describe(), "input_required: waiting");
        assert_eq!(t.input_requests().unwrap().len(), 1);
    }

    #[test]
    fn capabilities_and_support() {
        let caps: ServerCapabilities = serde_json::from_value(json!({
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
            "extensions": {TASKS_EXTENSION: {}}
        }))
        .unwrap();
        assert!(caps.tasks_for_tool_calls() && caps.tasks_list() && caps.tasks_cancel());
        assert!(caps.has_extension(TASKS_EXTENSION));
        assert!(!ServerCapabilities::default().tasks_for_tool_calls());
        let tool: Tool = serde_json::from_value(
            json!({"name": "t", "inputSchema": {}, "execution": {"taskSupport": "required"}}),
        )
        .unwrap();
        assert_eq!(tool.task_support(), TaskSupport::Required);
        assert_eq!(
            TaskSupport::of_value(&json!({"name": "u"})),
            TaskSupport::Forbidden
        );
    }
}
