//! The MCP surface, once: every client→server method with its name,
//! params, result type, the server capability it needs and whether it is
//! paged; every kind of server→client request with the client capability
//! its handler declares; and the notifications a client sends.
//!
//! An adapter reaches every method through one generic path: it sends
//! `M::NAME` with `M::params()` and parses the answer as `M::Result`;
//! for a [`Paged`] method it follows `nextCursor` with a [`Paginator`]
//! and collects the items. No adapter writes a method name.
//!
//! ```
//! use mcpwire::mcp::methods::{CallTool, Method, ListTools, Paged};
//! use serde_json::json;
//!
//! let call = CallTool::new("echo", json!({"message": "hi"}));
//! assert_eq!(CallTool::NAME, "tools/call");
//! assert_eq!(
//!     call.params().unwrap().unwrap().get(),
//!     r#"{"name":"echo","arguments":{"message":"hi"}}"#
//! );
//! let page: <ListTools as Method>::Result =
//!     serde_json::from_str(r#"{"tools":[],"nextCursor":"2"}"#).unwrap();
//! assert_eq!(ListTools::split(page).1.as_deref(), Some("2"));
//! ```
//!
//! [`Paginator`]: super::Paginator

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::codec::json::Params;
use crate::codec::scan::ShapeCheck;
use serde_json::Value;

use super::types::{
    CallToolResult, CompleteResult, Extra, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListTasksResult, ListToolsResult,
    LoggingLevel, Prompt, ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities, Task,
    Tool,
};

/// A server capability that a method needs (`capabilities.tools`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `tools`.
    Tools,
    /// `resources`.
    Resources,
    /// `resources.subscribe: true`.
    ResourcesSubscribe,
    /// `prompts`.
    Prompts,
    /// `completions`.
    Completions,
    /// `logging`.
    Logging,
    /// Tasks: `tasks.requests.tools.call` (2025-11-25) or the
    /// `io.modelcontextprotocol/tasks` extension (2026-07-28).
    Tasks,
    /// `tasks.list` (2025-11-25 only).
    TasksList,
    /// `tasks.cancel` (2025-11-25), or the tasks extension (2026-07-28,
    /// where every task can be asked to stop).
    TasksCancel,
}

impl Capability {
    /// Its name in the spec's capability object, as error messages quote it.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Tools => "tools",
            Capability::Resources => "resources",
            Capability::ResourcesSubscribe => "resources.subscribe",
            Capability::Prompts => "prompts",
            Capability::Completions => "completions",
            Capability::Logging => "logging",
            Capability::Tasks => "tasks",
            Capability::TasksList => "tasks.list",
            Capability::TasksCancel => "tasks.cancel",
        }
    }

    /// Whether `caps` declares it.
    pub fn declared_in(self, caps: &ServerCapabilities) -> bool {
        match self {
            Capability::Tools => caps.tools.is_some(),
            Capability::Resources => caps.resources.is_some(),
            Capability::ResourcesSubscribe => {
                caps.resources.as_ref().and_then(|r| r.subscribe) == Some(true)
            }
            Capability::Prompts => caps.prompts.is_some(),
            Capability::Completions => caps.completions.is_some(),
            Capability::Logging => caps.logging.is_some(),
            Capability::Tasks => {
                caps.tasks_for_tool_calls() || caps.has_extension(super::types::TASKS_EXTENSION)
            }
            Capability::TasksList => caps.tasks_list(),
            Capability::TasksCancel => {
                caps.tasks_cancel() || caps.has_extension(super::types::TASKS_EXTENSION)
            }
        }
    }
}

/// One client→server request method.
pub trait Method: Serialize {
    /// The JSON-RPC method name.
    const NAME: &'static str;
    /// The server capability it needs, if the spec ties it to one.
    const CAPABILITY: Option<Capability>;
    /// Whether its result is one page of a list (see [`Paged`]).
    const PAGED: bool;
    /// What a successful answer parses into.
    type Result: DeserializeOwned;

    /// Its params as [`Params`] (this crate's writer: not parsed again on
    /// the way out); `None` for a method without params (and for the
    /// first page of a list, which needs no cursor). This is what the
    /// typed calls send: a method with params of its own shape overrides
    /// this one ([`params`](Self::params) follows it).
    fn params_json(&self) -> Result<Option<Params>, serde_json::Error> {
        params_in(self, String::new())
    }

    /// [`params_json`](Self::params_json) written into `buf`, the buffer
    /// of an earlier call's params ([`Params::into_buffer`]), so that a
    /// call allocates nothing for its params. By default `buf` is not
    /// used and this is `params_json` (a method with params of its own
    /// shape stays as it is); this crate's methods write into it.
    fn params_json_in(&self, buf: String) -> Result<Option<Params>, serde_json::Error> {
        let _ = buf;
        self.params_json()
    }

    /// Reads a successful answer (owned: a reader may keep its buffer):
    /// serde by default; a result with a reader of its own (`tools/call`'s,
    /// which takes the common tool result straight from the text)
    /// overrides it.
    // Boxed on purpose: the answer's own buffer, which an override may keep.
    #[allow(clippy::boxed_local)]
    fn read_result(raw: Box<RawValue>) -> Result<Self::Result, serde_json::Error>
    where
        Self: Sized,
    {
        serde_json::from_str(raw.get())
    }

    /// [`params_json`](Self::params_json) as raw JSON.
    fn params(&self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        self.params_json()?.map(|p| p.to_raw()).transpose()
    }
}

/// `method`'s params written into `buf` (`None` for the first page of a
/// list): what [`Method::params_json`] and this crate's
/// [`Method::params_json_in`] write.
pub(crate) fn params_in<M: Method + ?Sized>(
    method: &M,
    buf: String,
) -> Result<Option<Params>, serde_json::Error> {
    let params = Params::of_in(method, buf)?;
    Ok((!(M::PAGED && params.get() == "{}")).then_some(params))
}

/// A method whose result is one page of a list: `nextCursor` leads to the
/// next page.
pub trait Paged: Method {
    /// One entry of the list.
    type Item;

    /// The request for the page at `cursor` (`None`: the first page).
    fn page(cursor: Option<String>) -> Self;

    /// A page's items and the cursor of the next page.
    fn split(page: Self::Result) -> (Vec<Self::Item>, Option<String>);
}

/// The protocol eras a method exists in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Eras {
    /// Both the handshake era (2025-11-25 and before) and 2026-07-28.
    Both,
    /// The handshake era only: removed in 2026-07-28 (never sent to a
    /// 2026-07-28 server as itself).
    Handshake,
    /// 2026-07-28 only.
    Modern,
}

/// What the client knows about one client→server method: the row of
/// [`METHODS`] every decision reads instead of comparing names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MethodSpec {
    /// Which method.
    pub id: MethodId,
    /// The method name.
    pub name: &'static str,
    /// The server capability it needs.
    pub capability: Option<Capability>,
    /// Whether it is paged.
    pub paged: bool,
    /// The eras it exists in.
    pub eras: Eras,
    /// Whether its result may carry caching hints (`ttlMs`, SEP-2549).
    pub cacheable: bool,
    /// Whether a 2026-07-28 server may answer it with an input round
    /// (multi round-trip requests).
    pub input_rounds: bool,
    /// The param a 2026-07-28 HTTP request repeats in `Mcp-Name`.
    pub header_param: Option<&'static str>,
    /// Whether it may run as a task (`params.task`, or a task result).
    pub task_augmentable: bool,
}

/// A result without content (`{}`, with whatever `_meta` the server adds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyResult {
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Declares each method once: its row in [`METHODS`] (indexed by its
/// [`MethodId`]), and, for a method with a typed request, its struct's
/// [`Method`] (and [`Paged`] where it lists).
macro_rules! methods {
    ($(
        $id:ident = $name:literal $(as $ty:ident -> $result:ty $([$read:path, $check:path])?)?, {
            cap: $cap:expr, paged: $paged:literal, eras: $eras:ident,
            cache: $cache:literal, rounds: $rounds:literal,
            header: $header:expr, task: $task:literal $(,)?
        };
    )*) => {
        $($(
            impl Method for $ty {
                const NAME: &'static str = $name;
                const CAPABILITY: Option<Capability> = $cap;
                const PAGED: bool = $paged;
                type Result = $result;
                fn params_json_in(&self, buf: String) -> Result<Option<Params>, serde_json::Error> {
                    params_in(self, buf)
                }
                $(
                    fn read_result(raw: Box<RawValue>) -> Result<$result, serde_json::Error> {
                        $read(raw)
                    }
                )?
            }
        )?)*
        /// Which method: a known name resolved once ([`MethodId::of`]) into
        /// the row of [`METHODS`] that every decision about it reads. Its
        /// variants are the table's rows, in the table's order, so
        /// [`MethodId::spec`] indexes the table by construction.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum MethodId {
            $(
                #[doc = concat!("`", $name, "`.")]
                $id,
            )*
        }

        /// Every client→server method this crate knows, in [`MethodId`]'s
        /// order.
        pub const METHODS: &[MethodSpec] = &[$(
            MethodSpec {
                id: MethodId::$id,
                name: $name,
                capability: $cap,
                paged: $paged,
                eras: Eras::$eras,
                cacheable: $cache,
                input_rounds: $rounds,
                header_param: $header,
                task_augmentable: $task,
            },
        )*];

        impl MethodId {
            /// The method called `name`, if this crate knows it.
            pub fn of(name: &str) -> Option<MethodId> {
                match name {
                    $($name => Some(MethodId::$id),)*
                    _ => None,
                }
            }

            /// Its name as a JSON string, quotes included (no name of the
            /// table has anything to escape): written into a request as
            /// it is.
            pub(crate) fn quoted(self) -> &'static str {
                match self {
                    $(MethodId::$id => concat!("\"", $name, "\""),)*
                }
            }

            /// The check of its result's usual shape, for a method whose
            /// result has a reader of its own: the engine proves an answer
            /// of that shape JSON with it instead of the general scan.
            pub(crate) fn result_check(self) -> Option<ShapeCheck> {
                match self {
                    $($($(MethodId::$id => Some($check),)?)?)*
                    _ => None,
                }
            }
        }
    };
}

methods! {
    Initialize = "initialize", {
        cap: None, paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    Ping = "ping", {
        cap: None, paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    Discover = "server/discover", {
        cap: None, paged: false, eras: Modern,
        cache: false, rounds: false, header: None, task: false };
    SubscriptionsListen = "subscriptions/listen", {
        cap: None, paged: false, eras: Modern,
        cache: false, rounds: false, header: None, task: false };
    CallTool = "tools/call" as CallTool -> CallToolResult
        [CallToolResult::from_raw, crate::mcp::types::read::common_end], {
        cap: Some(Capability::Tools), paged: false, eras: Both,
        cache: false, rounds: true, header: Some("name"), task: true };
    ListTools = "tools/list" as ListTools -> ListToolsResult, {
        cap: Some(Capability::Tools), paged: true, eras: Both,
        cache: true, rounds: false, header: None, task: false };
    ListResources = "resources/list" as ListResources -> ListResourcesResult, {
        cap: Some(Capability::Resources), paged: true, eras: Both,
        cache: true, rounds: false, header: None, task: false };
    ListResourceTemplates = "resources/templates/list"
        as ListResourceTemplates -> ListResourceTemplatesResult, {
        cap: Some(Capability::Resources), paged: true, eras: Both,
        cache: true, rounds: false, header: None, task: false };
    ReadResource = "resources/read" as ReadResource -> ReadResourceResult, {
        cap: Some(Capability::Resources), paged: false, eras: Both,
        cache: true, rounds: true, header: Some("uri"), task: false };
    Subscribe = "resources/subscribe" as Subscribe -> EmptyResult, {
        cap: Some(Capability::ResourcesSubscribe), paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    Unsubscribe = "resources/unsubscribe" as Unsubscribe -> EmptyResult, {
        cap: Some(Capability::ResourcesSubscribe), paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    ListPrompts = "prompts/list" as ListPrompts -> ListPromptsResult, {
        cap: Some(Capability::Prompts), paged: true, eras: Both,
        cache: true, rounds: false, header: None, task: false };
    GetPrompt = "prompts/get" as GetPrompt -> GetPromptResult, {
        cap: Some(Capability::Prompts), paged: false, eras: Both,
        cache: false, rounds: true, header: Some("name"), task: false };
    Complete = "completion/complete" as Complete -> CompleteResult, {
        cap: Some(Capability::Completions), paged: false, eras: Both,
        cache: false, rounds: false, header: None, task: false };
    SetLoggingLevel = "logging/setLevel" as SetLoggingLevel -> EmptyResult, {
        cap: Some(Capability::Logging), paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    GetTask = "tasks/get" as GetTask -> Task, {
        cap: Some(Capability::Tasks), paged: false, eras: Both,
        cache: false, rounds: false, header: Some("taskId"), task: false };
    TaskResult = "tasks/result" as TaskResult -> CallToolResult, {
        cap: Some(Capability::Tasks), paged: false, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
    UpdateTask = "tasks/update", {
        cap: None, paged: false, eras: Modern,
        cache: false, rounds: false, header: Some("taskId"), task: false };
    CancelTask = "tasks/cancel" as CancelTask -> EmptyResult, {
        cap: Some(Capability::TasksCancel), paged: false, eras: Both,
        cache: false, rounds: false, header: Some("taskId"), task: false };
    ListTasks = "tasks/list" as ListTasks -> ListTasksResult, {
        cap: Some(Capability::TasksList), paged: true, eras: Handshake,
        cache: false, rounds: false, header: None, task: false };
}

impl MethodId {
    /// Its row of [`METHODS`].
    pub const fn spec(self) -> &'static MethodSpec {
        &METHODS[self as usize]
    }

    /// Its name.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether it exists in the 2026-07-28 era (as itself).
    pub fn in_modern(self) -> bool {
        self.spec().eras != Eras::Handshake
    }
}

impl MethodSpec {
    /// Whether it is one of the `tasks/*` methods (declared by the tasks
    /// capability in 2025-11-25, by the tasks extension in 2026-07-28).
    pub fn is_task_method(&self) -> bool {
        matches!(
            self.id,
            MethodId::GetTask
                | MethodId::TaskResult
                | MethodId::UpdateTask
                | MethodId::CancelTask
                | MethodId::ListTasks
        )
    }
}

/// `ping` (no capability needed; answered by every server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Ping;

impl Method for Ping {
    const NAME: &'static str = MethodId::Ping.name();
    const CAPABILITY: Option<Capability> = None;
    const PAGED: bool = false;
    type Result = EmptyResult;

    fn params_json(&self) -> Result<Option<Params>, serde_json::Error> {
        Ok(None)
    }
}

/// The row of [`METHODS`] for `name`, if it is a method this crate knows.
pub fn info(name: &str) -> Option<&'static MethodSpec> {
    MethodId::of(name).map(MethodId::spec)
}

/// The server capability `method` needs, if the spec ties it to one.
///
/// Returns `Err(capability)` when `caps` lacks it: e.g. `tools/list`
/// without `capabilities.tools` gives `Err(Capability::Tools)`. Methods
/// this crate does not know need nothing.
pub fn check_capability(method: &str, caps: &ServerCapabilities) -> Result<(), Capability> {
    check_spec(info(method), caps)
}

/// [`check_capability`] for a method already resolved.
pub fn check_spec(
    spec: Option<&'static MethodSpec>,
    caps: &ServerCapabilities,
) -> Result<(), Capability> {
    match spec.and_then(|m| m.capability) {
        Some(cap) if !cap.declared_in(caps) => Err(cap),
        _ => Ok(()),
    }
}

/// A request for one page of a list.
macro_rules! list_method {
    ($(#[$doc:meta])* $ty:ident, $item:ty, $field:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
        pub struct $ty {
            /// The cursor of the page (`None`: the first).
            #[serde(skip_serializing_if = "Option::is_none")]
            pub cursor: Option<String>,
        }

        impl Paged for $ty {
            type Item = $item;

            fn page(cursor: Option<String>) -> Self {
                $ty { cursor }
            }

            fn split(page: Self::Result) -> (Vec<$item>, Option<String>) {
                (page.$field, page.next_cursor)
            }
        }
    };
}

list_method!(
    /// `tools/list`.
    ListTools, Tool, tools
);
list_method!(
    /// `resources/list`.
    ListResources, Resource, resources
);
list_method!(
    /// `resources/templates/list`.
    ListResourceTemplates, ResourceTemplate, resource_templates
);
list_method!(
    /// `prompts/list`.
    ListPrompts, Prompt, prompts
);
list_method!(
    /// `tasks/list` (2025-11-25; the 2026-07-28 extension has none).
    ListTasks, Task, tasks
);

/// A method whose only param is a task's id.
macro_rules! task_method {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $ty {
            /// The server's id of the task.
            pub task_id: String,
        }

        impl $ty {
            /// For task `task_id`.
            pub fn new(task_id: impl Into<String>) -> Self {
                $ty { task_id: task_id.into() }
            }
        }
    };
}

task_method!(
    /// `tasks/get`: the task's state now.
    GetTask
);
task_method!(
    /// `tasks/result`: waits for the task's end and gives its result. The
    /// connection follows the task itself (polling `tasks/get` at the
    /// server's interval, answering its questions, status changes as
    /// progress) in both eras; the 2026-07-28 extension has no
    /// `tasks/result` on the wire.
    TaskResult
);
task_method!(
    /// `tasks/cancel`.
    CancelTask
);

/// A method whose only param is a resource URI.
macro_rules! uri_method {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        pub struct $ty {
            /// The resource's URI.
            pub uri: String,
        }

        impl $ty {
            /// For the resource at `uri`.
            pub fn new(uri: impl Into<String>) -> Self {
                $ty { uri: uri.into() }
            }
        }
    };
}

uri_method!(
    /// `resources/read`.
    ReadResource
);
uri_method!(
    /// `resources/subscribe`.
    Subscribe
);
uri_method!(
    /// `resources/unsubscribe`.
    Unsubscribe
);

/// `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetPrompt {
    /// The prompt's name.
    pub name: String,
    /// Its arguments (an object of strings), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

impl GetPrompt {
    /// Gets `name` with `arguments` (`null` means none).
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        GetPrompt {
            name: name.into(),
            arguments: (!arguments.is_null()).then_some(arguments),
        }
    }
}

/// `completion/complete` for an argument of a prompt or resource template.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Complete {
    /// `{"type":"ref/prompt","name":…}` or `{"type":"ref/resource","uri":…}`.
    #[serde(rename = "ref")]
    pub reference: Value,
    /// The argument being completed.
    pub argument: CompleteArgument,
}

/// The argument of a [`Complete`] request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompleteArgument {
    /// Its name.
    pub name: String,
    /// What was typed so far.
    pub value: String,
}

impl Complete {
    /// Completes `argument`, typed so far as `value`, of `reference`.
    pub fn new(reference: Value, argument: impl Into<String>, value: impl Into<String>) -> Self {
        Complete {
            reference,
            argument: CompleteArgument {
                name: argument.into(),
                value: value.into(),
            },
        }
    }
}

/// `logging/setLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SetLoggingLevel {
    /// The lowest level the server should send.
    pub level: LoggingLevel,
}

/// The notifications the client's own machinery writes or reads, by name.
pub mod notifications {
    /// `notifications/initialized`: the 2025 handshake's last step
    /// (removed in 2026-07-28).
    pub const INITIALIZED: &str = "notifications/initialized";
    /// `notifications/cancelled`: a request given up (either side).
    pub const CANCELLED: &str = "notifications/cancelled";
    /// `notifications/progress`.
    pub const PROGRESS: &str = "notifications/progress";
    /// `notifications/roots/list_changed` (removed in 2026-07-28).
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// `notifications/tools/list_changed`.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/resources/list_changed`.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/resources/updated`.
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/tasks/status` (2025-11-25 tasks).
    pub const TASK_STATUS: &str = "notifications/tasks/status";
    /// `notifications/tasks` (the 2026-07-28 tasks extension).
    pub const TASKS: &str = "notifications/tasks";
    /// `notifications/subscriptions/acknowledged`: the first message on a
    /// 2026-07-28 `subscriptions/listen` stream.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

    /// Every name above.
    pub const ALL: &[&str] = &[
        INITIALIZED,
        CANCELLED,
        PROGRESS,
        ROOTS_LIST_CHANGED,
        TOOLS_LIST_CHANGED,
        PROMPTS_LIST_CHANGED,
        RESOURCES_LIST_CHANGED,
        RESOURCES_UPDATED,
        TASK_STATUS,
        TASKS,
        SUBSCRIPTIONS_ACKNOWLEDGED,
    ];
}

/// A notification the client sends.
pub trait ClientNotification: Serialize {
    /// The JSON-RPC method name.
    const NAME: &'static str;

    /// Its params as raw JSON; `None` for a notification without params.
    fn params(&self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        serde_json::value::to_raw_value(self).map(Some)
    }
}

/// `notifications/roots/list_changed`: the roots the client exposes changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RootsListChanged;

impl ClientNotification for RootsListChanged {
    const NAME: &'static str = notifications::ROOTS_LIST_CHANGED;

    fn params(&self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        Ok(None)
    }
}

mod server;
pub use server::{ListRootsResult, ServerRequestKind};

mod call;
pub use call::{CallTool, CallToolRef};

#[cfg(test)]
mod tests;
