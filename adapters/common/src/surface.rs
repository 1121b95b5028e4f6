//! The client surface written once for every adapter: the typed MCP
//! methods and the getters, on top of two primitives each client
//! provides (`request_raw` and `notify_raw`, `async` or blocking).
//!
//! [`client_surface!`](crate::client_surface) expands the same list into
//! `async fn`s for the async client and plain `fn`s for the blocking one;
//! each method reaches the core's typed description of its method
//! ([`mcpwire::mcp::methods`]) through the one generic path
//! (`send` / `list_all`), so no adapter writes a method name.

use std::cell::Cell;

use mcpwire::mcp::methods::{ClientNotification, Method};
use mcpwire::rpc::Params;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::session::{Info, Session};
use crate::Error;

/// What a client's executor shares with the surface: the session's
/// lock-free facts, and the session itself under the executor's lock.
pub trait SessionAccess {
    /// What is known about the server without a lock.
    fn info(&self) -> &Info;
    /// Runs `f` on the session under the executor's lock (nothing is
    /// driven: for reads).
    fn inspect<T>(&self, f: impl FnOnce(&mut Session) -> T) -> T;
}

/// The `Debug` of a client: its server's name.
#[doc(hidden)]
pub fn fmt_client(info: &Info, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("Client")
        .field("server", &info.server.get().map(|s| &s.server_info.name))
        .finish_non_exhaustive()
}

/// Most pages a list call follows before giving up.
pub const MAX_PAGES: usize = 10_000;

/// `method`'s params, written by core's serializer into the buffer of
/// this thread's last call's params ([`give_back_params`]).
#[doc(hidden)]
pub fn params_of<M: Method>(method: &M) -> Result<Option<Params>, Error> {
    let buf = PARAMS_BUFFER.with(Cell::take);
    method.params_json_in(buf).map_err(|source| Error::Decode {
        method: M::NAME.to_owned(),
        source,
    })
}

/// Largest params buffer kept for the next call's params.
const MAX_PARAMS_BUFFER: usize = 16 * 1024;

thread_local! {
    /// The buffer of this thread's last call's params, once the call's
    /// line has been written from them: the params of a call are not
    /// something its caller keeps, so a call allocates nothing for them.
    static PARAMS_BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

/// Keeps `params`' buffer for this thread's next call (none over
/// [`MAX_PARAMS_BUFFER`]): the connection has written the request.
#[doc(hidden)]
pub fn give_back_params(params: Option<Params>) {
    let Some(buf) = params.map(Params::into_buffer) else {
        return;
    };
    if buf.capacity() <= MAX_PARAMS_BUFFER {
        PARAMS_BUFFER.with(|b| b.set(buf));
    }
}

/// `notification`'s params as raw JSON.
#[doc(hidden)]
pub fn notification_params<N: ClientNotification>(
    notification: &N,
) -> Result<Option<Box<RawValue>>, Error> {
    notification.params().map_err(|source| Error::Decode {
        method: N::NAME.to_owned(),
        source,
    })
}

/// Serializable params as raw JSON.
#[doc(hidden)]
pub fn raw_params<P: serde::Serialize + ?Sized>(
    method: &str,
    params: Option<&P>,
) -> Result<Option<Box<RawValue>>, Error> {
    params
        .map(serde_json::value::to_raw_value)
        .transpose()
        .map_err(|source| Error::Decode {
            method: method.to_owned(),
            source,
        })
}

/// Serializable params as [`Params`] (core's serializer).
#[doc(hidden)]
pub fn json_params<P: serde::Serialize + ?Sized>(
    method: &str,
    params: Option<&P>,
) -> Result<Option<Params>, Error> {
    params
        .map(Params::of)
        .transpose()
        .map_err(|source| Error::Decode {
            method: method.to_owned(),
            source,
        })
}

/// A `tools/list` result: compiles the tools' output schemas.
#[doc(hidden)]
pub fn record_tools(access: &impl SessionAccess, tools: &[mcpwire::mcp::types::Tool]) {
    for note in access.info().output.record(tools) {
        tracing::warn!("{note}");
    }
}

/// A whole listing checked against the tool pins, if on: the tools to
/// return (withheld ones left out) ([`crate::pins`]).
#[doc(hidden)]
pub fn pin_tools(
    access: &impl SessionAccess,
    tools: Vec<mcpwire::mcp::types::Tool>,
) -> Vec<mcpwire::mcp::types::Tool> {
    let Some(pins) = &access.info().pins else {
        return tools;
    };
    let (kept, withheld) = pins.apply(tools);
    *access
        .info()
        .withheld
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = withheld;
    kept
}

/// A call to a tool the pins withhold is refused before it is sent.
#[doc(hidden)]
pub fn check_withheld(access: &impl SessionAccess, tool: &str) -> Result<(), Error> {
    // Only pins withhold tools: without them, no lock a call.
    if access.info().pins.is_none() {
        return Ok(());
    }
    let withheld = access
        .info()
        .withheld
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    match withheld.get(tool) {
        Some(change) => Err(Error::ToolWithheld {
            tool: tool.to_owned(),
            change: change.clone(),
        }),
        None => Ok(()),
    }
}

/// The shortest freshness over the pages of a list; none as soon as one
/// page has none.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct PageTtl {
    pages: usize,
    shortest: Option<std::time::Duration>,
}

impl PageTtl {
    /// One page's freshness.
    pub fn page(&mut self, ttl: Option<std::time::Duration>) {
        self.shortest = match (self.pages, ttl, self.shortest) {
            (0, t, _) => t,
            (_, Some(t), Some(s)) => Some(t.min(s)),
            _ => None,
        };
        self.pages += 1;
    }

    /// The shortest, if every page had one.
    pub fn shortest(&self) -> Option<std::time::Duration> {
        self.shortest
    }
}

/// Whether a `tools/call` result should be checked against a schema not
/// known yet: list the tools first (once per connection).
#[doc(hidden)]
pub fn wants_list_for(
    access: &impl SessionAccess,
    tool: &str,
    result: &mcpwire::mcp::types::CallToolResult,
) -> bool {
    access.info().output.wants_list_for(tool, result)
}

/// A `tools/call` result checked against its tool's output schema.
#[doc(hidden)]
pub fn check_output(
    access: &impl SessionAccess,
    tool: &str,
    result: &mcpwire::mcp::types::CallToolResult,
) -> Result<(), Error> {
    access
        .info()
        .output
        .check(tool, result)
        .map_err(|problem| Error::StructuredOutput {
            tool: tool.to_owned(),
            problem,
        })
}

/// A detached `tools/call`'s answer: a task, or a result checked as
/// `call_tool` checks one.
#[doc(hidden)]
pub fn task_started(
    access: &impl SessionAccess,
    tool: &str,
    raw: &RawValue,
) -> Result<mcpwire::mcp::types::TaskStarted, Error> {
    let method = <mcpwire::mcp::methods::CallTool as Method>::NAME;
    let value: serde_json::Value = parse(method, raw)?;
    let started =
        mcpwire::mcp::types::TaskStarted::from_result(value).map_err(|source| Error::Decode {
            method: method.to_owned(),
            source,
        })?;
    match &started {
        mcpwire::mcp::types::TaskStarted::Done(result) => check_output(access, tool, result)?,
        mcpwire::mcp::types::TaskStarted::Task(task) => {
            access.info().output.task_started(&task.task_id, tool)
        }
    }
    Ok(started)
}

/// A task's result, checked as its tool's when the task was started here.
#[doc(hidden)]
pub fn check_task_output(
    access: &impl SessionAccess,
    task_id: &str,
    result: &mcpwire::mcp::types::CallToolResult,
) -> Result<(), Error> {
    match access.info().output.tool_of_task(task_id) {
        Some(tool) => check_output(access, &tool, result),
        None => Ok(()),
    }
}

/// A raw result parsed as `T`.
#[doc(hidden)]
pub fn parse<T: DeserializeOwned>(method: &str, raw: &RawValue) -> Result<T, Error> {
    serde_json::from_str(raw.get()).map_err(|source| Error::Decode {
        method: method.to_owned(),
        source,
    })
}

/// The result of method `M`, read by its reader.
#[doc(hidden)]
pub fn read<M: Method>(raw: Box<RawValue>) -> Result<M::Result, Error> {
    M::read_result(raw).map_err(|source| Error::Decode {
        method: M::NAME.to_owned(),
        source,
    })
}

/// Expands the client surface into an `impl` block of a client type that
/// has `request_raw(&self, &str, Option<Box<RawValue>>, CallOptions)`,
/// `notify_raw(&self, &str, Option<Box<RawValue>>)` and `shared(&self)`
/// giving a [`SessionAccess`]: `client_surface!(async)` for an async
/// client, `client_surface!(blocking)` for a blocking one.
#[macro_export]
#[doc(hidden)]
macro_rules! client_surface {
    (async) => {
        $crate::client_surface!(@emit [async] [.await]);
    };
    (blocking) => {
        $crate::client_surface!(@emit [] []);
    };
    (@emit [$($async:tt)*] [$($await:tt)*]) => {
        // ----- generic ------------------------------------------------------

        /// Sends the typed request `method` (any of
        /// [`mcpwire::mcp::methods`], or one of your own implementing
        /// [`Method`](mcpwire::mcp::Method)) and parses its result.
        pub $($async)* fn send<M: $crate::__private::Method>(
            &self,
            method: &M,
            options: $crate::CallOptions,
        ) -> Result<M::Result, $crate::Error> {
            let params = $crate::surface::params_of(method)?;
            let raw = self.request_params(M::NAME, params, options)$($await)*?;
            $crate::surface::read::<M>(raw)
        }

        /// Every item of the paged list `M`: follows `nextCursor` to the
        /// end, refusing a repeated cursor.
        pub $($async)* fn list_all<M: $crate::__private::Paged>(
            &self,
        ) -> Result<Vec<M::Item>, $crate::Error> {
            self.list_all_with::<M>($crate::CallOptions::new())$($await)*
        }

        /// [`list_all`](Self::list_all) with options for each page
        /// (timeout, [`bypass_cache`]($crate::CallOptions::bypass_cache)).
        pub $($async)* fn list_all_with<M: $crate::__private::Paged>(
            &self,
            options: $crate::CallOptions,
        ) -> Result<Vec<M::Item>, $crate::Error> {
            let mut pages = $crate::__private::Paginator::new($crate::surface::MAX_PAGES);
            let mut all = Vec::new();
            loop {
                let request = M::page(pages.cursor().map(str::to_owned));
                let page = self.send(&request, options.clone())$($await)*?;
                let (items, next) = M::split(page);
                all.extend(items);
                if !pages.advance(next)? {
                    return Ok(all);
                }
            }
        }

        /// Sends a request with serializable params and parses its result.
        pub $($async)* fn request<P: $crate::__private::Serialize + ?Sized, T: $crate::__private::DeserializeOwned>(
            &self,
            method: &str,
            params: Option<&P>,
            options: $crate::CallOptions,
        ) -> Result<T, $crate::Error> {
            let params = $crate::surface::json_params(method, params)?;
            let raw = self.request_params(method, params, options)$($await)*?;
            $crate::surface::parse(method, &raw)
        }

        /// Sends a notification.
        pub $($async)* fn notify(
            &self,
            method: &str,
            params: Option<$crate::__private::Value>,
        ) -> Result<(), $crate::Error> {
            let params = $crate::surface::raw_params(method, params.as_ref())?;
            self.notify_raw(method, params)$($await)*
        }

        // ----- typed methods -----------------------------------------------

        /// `ping`.
        pub $($async)* fn ping(&self) -> Result<(), $crate::Error> {
            self.send(&$crate::methods::Ping, $crate::CallOptions::new())$($await)*.map(drop)
        }

        /// Every tool (follows `nextCursor` to the end).
        ///
        /// Their output schemas are compiled for the checks of
        /// [`call_tool_with`](Self::call_tool_with).
        ///
        /// A 2026-07-28 server may say how long its list stays fresh
        /// (`ttlMs`): within that time the list comes from the client's
        /// cache, until the server says it changed
        /// ([`list_tools_with`](Self::list_tools_with) and
        /// [`CallOptions::bypass_cache`]($crate::CallOptions::bypass_cache)
        /// ask it anyway).
        pub $($async)* fn list_tools(&self) -> Result<Vec<$crate::types::Tool>, $crate::Error> {
            self.list_tools_with($crate::CallOptions::new())$($await)*
        }

        /// [`list_tools`](Self::list_tools) with options for each page.
        pub $($async)* fn list_tools_with(
            &self,
            options: $crate::CallOptions,
        ) -> Result<Vec<$crate::types::Tool>, $crate::Error> {
            let tools = self.list_all_with::<$crate::methods::ListTools>(options)$($await)*?;
            let tools = $crate::surface::pin_tools(&**self.shared(), tools);
            $crate::surface::record_tools(&**self.shared(), &tools);
            Ok(tools)
        }

        /// [`list_tools`](Self::list_tools), and how long the server said
        /// the list stays fresh: the shortest `ttlMs` of its pages
        /// (2026-07-28, SEP-2549); `None` when a page says nothing (as in
        /// 2025-11-25). For a cache of the list outside the connection
        /// (the manager's tool cache).
        pub $($async)* fn list_tools_fresh_for(
            &self,
        ) -> Result<(Vec<$crate::types::Tool>, Option<std::time::Duration>), $crate::Error> {
            let mut pages = $crate::__private::Paginator::new($crate::surface::MAX_PAGES);
            let mut all = Vec::new();
            let mut ttl = $crate::surface::PageTtl::default();
            loop {
                let request = <$crate::methods::ListTools as $crate::__private::Paged>::page(
                    pages.cursor().map(str::to_owned),
                );
                let page = self.send(&request, $crate::CallOptions::new())$($await)*?;
                ttl.page(page.ttl());
                let (items, next) =
                    <$crate::methods::ListTools as $crate::__private::Paged>::split(page);
                all.extend(items);
                if !pages.advance(next)? {
                    let all = $crate::surface::pin_tools(&**self.shared(), all);
                    $crate::surface::record_tools(&**self.shared(), &all);
                    return Ok((all, ttl.shortest()));
                }
            }
        }

        /// Tells the client about tools it did not list itself (a list
        /// kept from an earlier connection that is still fresh): their
        /// output schemas are checked as after [`list_tools`](Self::list_tools).
        pub fn remember_tools(&self, tools: &[$crate::types::Tool]) {
            $crate::surface::record_tools(&**self.shared(), tools);
        }

        /// Every resource.
        pub $($async)* fn list_resources(
            &self,
        ) -> Result<Vec<$crate::types::Resource>, $crate::Error> {
            self.list_all::<$crate::methods::ListResources>()$($await)*
        }

        /// Every resource template.
        pub $($async)* fn list_resource_templates(
            &self,
        ) -> Result<Vec<$crate::types::ResourceTemplate>, $crate::Error> {
            self.list_all::<$crate::methods::ListResourceTemplates>()$($await)*
        }

        /// Every prompt.
        pub $($async)* fn list_prompts(&self) -> Result<Vec<$crate::types::Prompt>, $crate::Error> {
            self.list_all::<$crate::methods::ListPrompts>()$($await)*
        }

        /// `tools/call`. The arguments are anything serializable to a
        /// JSON object, borrowed or owned: a `json!({...})`, a `&Value`
        /// kept for the next call, a typed struct of your own (written as
        /// it is, without a `Value` made of it). Arguments that serialize
        /// as `null` mean none.
        pub $($async)* fn call_tool(
            &self,
            name: &str,
            arguments: impl $crate::__private::Serialize,
        ) -> Result<$crate::types::CallToolResult, $crate::Error> {
            self.call_tool_with(name, arguments, $crate::CallOptions::new())$($await)*
        }

        /// `tools/call` with options (timeout, progress, cancellation).
        ///
        /// A tool with an `outputSchema` must return matching
        /// `structuredContent` (unless its result is an error):
        /// otherwise [`Error::StructuredOutput`]($crate::Error::StructuredOutput).
        /// A result with `structuredContent` of a tool not listed yet has
        /// the client list the tools (once per connection) to learn the
        /// schema.
        pub $($async)* fn call_tool_with(
            &self,
            name: &str,
            arguments: impl $crate::__private::Serialize,
            options: $crate::CallOptions,
        ) -> Result<$crate::types::CallToolResult, $crate::Error> {
            $crate::surface::check_withheld(&**self.shared(), name)?;
            let call = $crate::methods::CallToolRef::new(name, &arguments);
            let result = self.send(&call, options)$($await)*?;
            if $crate::surface::wants_list_for(&**self.shared(), name, &result) {
                // A list that fails leaves the result unchecked (it was
                // only asked for to check it).
                if let Err(e) = self.list_tools()$($await)* {
                    $crate::__private::tracing::debug!(
                        "{} for the output schema of `{name}` failed: {e}",
                        <$crate::methods::ListTools as $crate::__private::Method>::NAME
                    );
                }
            }
            $crate::surface::check_output(&**self.shared(), name, &result)?;
            Ok(result)
        }

        // ----- tasks -----------------------------------------------------------

        /// Starts `tools/call` as a task when the server runs it as one,
        /// and returns at once: [`TaskStarted::Task`]($crate::types::TaskStarted)
        /// with the task to follow later ([`task_result`](Self::task_result),
        /// [`get_task`](Self::get_task), [`cancel_task`](Self::cancel_task)),
        /// or [`TaskStarted::Done`]($crate::types::TaskStarted) when the
        /// server answered at once.
        ///
        /// In 2025-11-25 a task is asked for when the server takes tasks
        /// and the tool allows one (`execution.taskSupport`, from the last
        /// [`list_tools`](Self::list_tools)); in 2026-07-28 the server
        /// decides. [`call_tool`](Self::call_tool) follows a task by itself.
        pub $($async)* fn start_tool_task(
            &self,
            name: &str,
            arguments: $crate::__private::Value,
            options: $crate::CallOptions,
        ) -> Result<$crate::types::TaskStarted, $crate::Error> {
            $crate::surface::check_withheld(&**self.shared(), name)?;
            let call = $crate::methods::CallTool::new(name, arguments);
            let params = $crate::surface::params_of(&call)?;
            let method = <$crate::methods::CallTool as $crate::__private::Method>::NAME;
            let raw = self.request_params(method, params, options.detach_task())$($await)*?;
            $crate::surface::task_started(&**self.shared(), name, &raw)
        }

        /// `tasks/get`: a task's state now.
        pub $($async)* fn get_task(
            &self,
            task_id: &str,
        ) -> Result<$crate::types::Task, $crate::Error> {
            self.send(&$crate::methods::GetTask::new(task_id), $crate::CallOptions::new())$($await)*
        }

        /// Waits for task `task_id`'s end and returns its result, following
        /// it as [`call_tool`](Self::call_tool) does: polls at the server's
        /// interval, passes status changes to the progress observer,
        /// answers the server's questions through the handlers, and
        /// cancels the task when the call times out or is cancelled. A
        /// task started here with [`start_tool_task`](Self::start_tool_task)
        /// has its result checked against its tool's output schema.
        pub $($async)* fn task_result(
            &self,
            task_id: &str,
            options: $crate::CallOptions,
        ) -> Result<$crate::types::CallToolResult, $crate::Error> {
            let result = self.send(&$crate::methods::TaskResult::new(task_id), options)$($await)*?;
            $crate::surface::check_task_output(&**self.shared(), task_id, &result)?;
            Ok(result)
        }

        /// `tasks/cancel`: asks the server to cancel task `task_id`
        /// (cooperative: it may still end otherwise).
        pub $($async)* fn cancel_task(&self, task_id: &str) -> Result<(), $crate::Error> {
            self.send(&$crate::methods::CancelTask::new(task_id), $crate::CallOptions::new())$($await)*
                .map(drop)
        }

        /// Every task the server lists (`tasks/list`, 2025-11-25). A
        /// 2026-07-28 server has no list: the call fails with
        /// `CallError::NotSupported` before anything is sent.
        pub $($async)* fn list_tasks(&self) -> Result<Vec<$crate::types::Task>, $crate::Error> {
            self.list_all::<$crate::methods::ListTasks>()$($await)*
        }

        /// `resources/read`.
        pub $($async)* fn read_resource(
            &self,
            uri: &str,
        ) -> Result<$crate::types::ReadResourceResult, $crate::Error> {
            self.send(&$crate::methods::ReadResource::new(uri), $crate::CallOptions::new())$($await)*
        }

        /// `resources/subscribe`.
        pub $($async)* fn subscribe(&self, uri: &str) -> Result<(), $crate::Error> {
            self.send(&$crate::methods::Subscribe::new(uri), $crate::CallOptions::new())$($await)*
                .map(drop)
        }

        /// `resources/unsubscribe`.
        pub $($async)* fn unsubscribe(&self, uri: &str) -> Result<(), $crate::Error> {
            self.send(&$crate::methods::Unsubscribe::new(uri), $crate::CallOptions::new())$($await)*
                .map(drop)
        }

        /// `prompts/get` with string arguments.
        pub $($async)* fn get_prompt(
            &self,
            name: &str,
            arguments: $crate::__private::Value,
        ) -> Result<$crate::types::GetPromptResult, $crate::Error> {
            let request = $crate::methods::GetPrompt::new(name, arguments);
            self.send(&request, $crate::CallOptions::new())$($await)*
        }

        /// `completion/complete` (`reference` is `{"type":"ref/prompt","name":…}`
        /// or `{"type":"ref/resource","uri":…}`).
        pub $($async)* fn complete(
            &self,
            reference: $crate::__private::Value,
            argument: &str,
            value: &str,
        ) -> Result<$crate::types::CompleteResult, $crate::Error> {
            let request = $crate::methods::Complete::new(reference, argument, value);
            self.send(&request, $crate::CallOptions::new())$($await)*
        }

        /// `logging/setLevel`.
        pub $($async)* fn set_logging_level(
            &self,
            level: $crate::types::LoggingLevel,
        ) -> Result<(), $crate::Error> {
            let request = $crate::methods::SetLoggingLevel { level };
            self.send(&request, $crate::CallOptions::new())$($await)*.map(drop)
        }

        /// Tells the server the roots changed (`notifications/roots/list_changed`).
        pub $($async)* fn roots_changed(&self) -> Result<(), $crate::Error> {
            let notification = $crate::methods::RootsListChanged;
            let params = $crate::surface::notification_params(&notification)?;
            self.notify_raw(
                <$crate::methods::RootsListChanged as $crate::__private::ClientNotification>::NAME,
                params,
            )$($await)*
        }

        // ----- getters -----------------------------------------------------

        fn info(&self) -> &$crate::session::Info {
            $crate::surface::SessionAccess::info(&**self.shared())
        }

        /// The server's `initialize` result (in the 2026-07-28 era, what
        /// `server/discover` said, in the same shape).
        pub fn server(&self) -> &$crate::types::InitializeResult {
            self.info().server.get().expect("set before connect returns")
        }

        /// The negotiated protocol version.
        pub fn protocol_version(&self) -> &str {
            &self.server().protocol_version
        }

        /// How the protocol era was found: pinned, remembered, probed,
        /// or the server started again after the probe.
        pub fn era_finding(&self) -> Option<&mcpwire::connection::EraFinding> {
            self.info().era_finding.get()
        }

        /// How long the connection took to be ready (the handshake or
        /// the probe, and any restart; not the process's own start).
        pub fn connect_time(&self) -> Option<std::time::Duration> {
            self.info().connected_in.get().copied()
        }

        /// The transport in use: `stdio`, `streamable-http` or `sse`.
        pub fn transport(&self) -> &'static str {
            self.info().transport.get().copied().unwrap_or("stdio")
        }

        /// Why the connection closed, if it has (server exited, closed by
        /// the client, transport failure).
        pub fn closed_reason(&self) -> Option<&str> {
            self.info().closed.get().map(String::as_str)
        }

        /// The connection's counters (messages, malformed input, late and
        /// unknown responses, …).
        pub fn stats(&self) -> $crate::__private::Stats {
            $crate::surface::SessionAccess::inspect(&**self.shared(), |s| s.stats())
        }

        /// Server notifications from now on: an async stream and a
        /// blocking iterator (see [`Notifications`]($crate::Notifications)).
        pub fn notifications(&self) -> $crate::Notifications {
            $crate::surface::SessionAccess::inspect(&**self.shared(), |s| s.subscribe())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire::mcp::methods::{CallToolRef, ListTools};

    /// A call's params are written into the buffer of this thread's last
    /// call's params once it is given back; a large one is not kept.
    #[test]
    fn params_reuse_the_last_calls_buffer() {
        let args = serde_json::json!({"text": "hello"});
        // A capacity no fresh buffer has, to know it again.
        let given = Params::of_in(&args, String::with_capacity(1000)).unwrap();
        give_back_params(Some(given));
        let params = params_of(&CallToolRef::new("echo", &args))
            .unwrap()
            .unwrap();
        assert_eq!(
            params.get(),
            r#"{"name":"echo","arguments":{"text":"hello"}}"#
        );
        assert_eq!(params.into_buffer().capacity(), 1000);
        // A large one is not kept.
        let big = serde_json::json!({"text": "x".repeat(MAX_PARAMS_BUFFER)});
        give_back_params(params_of(&CallToolRef::new("big", &big)).unwrap());
        let next = params_of(&CallToolRef::new("echo", &args))
            .unwrap()
            .unwrap();
        assert!(next.into_buffer().capacity() < MAX_PARAMS_BUFFER);
        // The first page of a list has no params.
        assert!(params_of(&ListTools::default()).unwrap().is_none());
    }
}
