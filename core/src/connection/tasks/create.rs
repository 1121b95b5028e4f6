//! What the application asks for: a `tools/call` that may become a task
//! (2025-11-25: asked for as one, or sent again as one when refused), a
//! `tasks/result` it awaits, and the completions that say whether a task
//! was made.

use super::*;
use crate::rpc::Json;

impl Tasks {
    // ---- requests of the application ---------------------------------------

    /// 2025-11-25: how `tools/call` goes out to a server that takes
    /// tasks (see [`Augment`]). One parse of the params decides it.
    pub(in crate::connection) fn augment(
        &self,
        method: Option<MethodId>,
        params: Option<Json<'_>>,
        options: &RequestOptions,
        caps: &ServerCapabilities,
    ) -> Augment {
        let augmentable = method.is_some_and(|m| m.spec().task_augmentable);
        if !self.enabled || !augmentable || !caps.tasks_for_tool_calls() {
            return Augment::Plain;
        }
        let Some(value) = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
            return Augment::Plain;
        };
        let Some(name) = value.get("name").and_then(Value::as_str) else {
            return Augment::Plain;
        };
        let wanted = match self.support.get(name).copied() {
            Some(TaskSupport::Required) => true,
            Some(TaskSupport::Optional) => options.detach_task,
            Some(TaskSupport::Forbidden) => false,
            // Asked for as a task by the caller: nothing to retry.
            None if value.get("task").is_some() => return Augment::Plain,
            // Not listed yet: plain; if the server says it must run as a
            // task, it is sent again as one.
            None => {
                let name = name.to_owned();
                return with_task(value, options)
                    .map_or(Augment::Plain, |v| Augment::RetryAsTask(name, v));
            }
        };
        if !wanted {
            return Augment::Plain;
        }
        with_task(value, options)
            .and_then(|v| serde_json::value::to_raw_value(&v).ok())
            .map_or(Augment::Plain, Augment::AsTask)
    }

    /// Request `id` of the application was sent: a `tools/call` that may
    /// come back as a task (`augmented`: asked for as one, 2025-11-25;
    /// `retry`: the tool and params to send again as a task if refused;
    /// in 2026-07-28 the server decides), or a `tools/list` whose tools
    /// say whether they take tasks.
    pub(in crate::connection) fn requested(
        &mut self,
        (now, era): (Instant, Era),
        id: u64,
        method: Option<MethodId>,
        options: RequestOptions,
        caps: &ServerCapabilities,
        augment: Augment,
    ) {
        let modern = era == Era::Modern;
        let (augmented, retry) = match augment {
            Augment::Plain => (false, None),
            Augment::AsTask(_) => (true, None),
            Augment::RetryAsTask(name, params) => (false, Some((name, params))),
        };
        match method {
            Some(MethodId::CallTool)
                if augmented || retry.is_some() || (self.enabled && modern) =>
            {
                let deadline = options.timeout.and_then(|t| now.checked_add(t));
                let creating = Creating {
                    options,
                    deadline,
                    cancel_ok: cancels(caps, era),
                    retry,
                };
                self.creating.insert(id, creating);
            }
            Some(MethodId::ListTools) if self.enabled && !modern && caps.tasks_for_tool_calls() => {
                self.tool_lists.insert(id);
            }
            _ => {}
        }
    }

    /// The application's id of request `id` of ours (a call sent again as
    /// a task reports progress under its own id).
    pub(in crate::connection) fn app_id(&self, id: u64) -> Option<u64> {
        self.alias.get(&id).copied()
    }

    /// `tasks/result {taskId}` of the application, under `app` (an id the
    /// connection reserved): follows the task to its end.
    pub(in crate::connection) fn await_task(
        &mut self,
        (now, era): (Instant, Era),
        app: u64,
        params: Option<Json<'_>>,
        options: RequestOptions,
        caps: &ServerCapabilities,
    ) -> Result<(), &'static str> {
        let task_id = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|v| v.get("taskId").and_then(Value::as_str).map(str::to_owned))
            .ok_or("tasks/result needs a string taskId")?;
        if self.follows.len() >= MAX_FOLLOWS {
            return Err("too many tasks followed at once");
        }
        let deadline = options.timeout.and_then(|t| now.checked_add(t));
        let follow = Follow::new(
            task_id,
            era,
            options,
            (now, deadline, self.max_wait),
            app,
            cancels(caps, era),
        );
        self.watch_changed |= era == Era::Modern;
        self.follows.insert(app, follow);
        self.poll(now, app);
        Ok(())
    }

    // ---- completions -------------------------------------------------------------

    /// A completion for the application's request `id` (or one of ours):
    /// `Some` to deliver, `None` when this sub-state took it (a task result
    /// has the shape of the era `cx` speaks only).
    pub(in crate::connection) fn complete(
        &mut self,
        cx: &mut Ctx<'_>,
        id: u64,
        outcome: Outcome,
    ) -> Option<(u64, Outcome)> {
        if self.ours.is_empty() && self.creating.is_empty() && self.tool_lists.is_empty() {
            // No task in sight (the common case): nothing to look up.
            return Some((id, outcome));
        }
        if let Some((app, purpose)) = self.ours.remove(&id) {
            self.ours_done(cx, app, id, purpose, outcome);
            return None;
        }
        if self.tool_lists.remove(&id) {
            if let Ok(raw) = &outcome {
                self.read_support(raw);
            }
            return Some((id, outcome));
        }
        let Some(mut creating) = self.creating.remove(&id) else {
            return Some((id, outcome));
        };
        let raw = match outcome {
            Ok(raw) => raw,
            Err(RequestError::Remote(e))
                if creating.retry.is_some() && TASK_REQUIRED_CODES.contains(&e.code) =>
            {
                let (name, params) = creating.retry.take()?;
                return self.call_as_task(cx, id, (name, params), creating, &e);
            }
            e => return Some((id, e)),
        };
        let creation = task_of_creation(&raw, cx.era);
        self.created(cx, id, id, creating, creation, raw)
    }

    /// A `tools/call` answered with `raw` (which is `creation`): a task to
    /// follow (`None`: it is followed), or what to deliver to the
    /// application's `app`. `progress_id`: the request that carried the
    /// call's progress token.
    pub(super) fn created(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        progress_id: u64,
        creating: Creating,
        creation: Creation,
        raw: Box<RawValue>,
    ) -> Option<(u64, Outcome)> {
        let modern = cx.era == Era::Modern;
        let task = match creation {
            Creation::NotTask => return Some((app, Ok(raw))),
            Creation::Invalid(why) => {
                let message = format!("the server answered tools/call with an invalid task: {why}");
                return Some((app, Err(RequestError::Transport { message })));
            }
            Creation::Task(task) => task,
        };
        if creating.options.detach_task || (creating.options.relay && modern) {
            // The caller follows it (a relayed call: its own client).
            return Some((app, Ok(raw)));
        }
        if self.follows.len() >= MAX_FOLLOWS {
            // Nobody would follow it: the server need not run it.
            if creating.cancel_ok {
                self.queue_cancel(app, &task.task_id);
            }
            let message = format!(
                "too many tasks followed at once; task {} is cancelled",
                task.task_id
            );
            return Some((app, Err(RequestError::Transport { message })));
        }
        let follow = Follow::new(
            task.task_id.clone(),
            cx.era,
            creating.options,
            (cx.now, creating.deadline, self.max_wait),
            progress_id,
            creating.cancel_ok,
        );
        self.watch_changed |= modern;
        if !modern && creating.options.progress {
            self.lingers.push((progress_id, true));
        }
        self.follows.insert(app, follow);
        self.apply(cx, app, task, Source::Created);
        None
    }

    /// 2025-11-25: the server refused call `app` of tool `name` as a plain
    /// call with `error`; it must run as a task. Sent again as one (a new
    /// id) with the time the call has left.
    pub(super) fn call_as_task(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        (name, params): (String, Value),
        creating: Creating,
        error: &ErrorObject,
    ) -> Option<(u64, Outcome)> {
        cx.out
            .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                "tools/call {name:?} refused as a plain call ({}: {}); the server takes tasks, \
             so it is sent again as a task",
                error.code, error.message
            ))));
        let mut options = creating.options;
        if let Some(deadline) = creating.deadline {
            let left = deadline.saturating_duration_since(cx.now);
            if left.is_zero() {
                return Some((app, Err(RequestError::Remote(error.clone()))));
            }
            options.timeout = Some(left);
        }
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Call,
            params,
            options,
        });
        let retrying = Retrying {
            id: None,
            creating,
            name,
            refused: error.clone(),
        };
        self.calls.insert(app, retrying);
        None
    }

    /// 2025-11-25: the answer to call `app` sent again as a task (our
    /// request `id`).
    pub(super) fn call_done(&mut self, cx: &mut Ctx<'_>, app: u64, id: u64, outcome: Outcome) {
        if self.calls.get(&app).and_then(|r| r.id) != Some(id) {
            // Cancelled or closed already: the application was told.
            self.alias.remove(&id);
            return;
        }
        let Some(retrying) = self.calls.remove(&app) else {
            return;
        };
        let asked = retrying.creating.options.timeout;
        let delivered = match outcome {
            Ok(raw) => {
                // Only a 2025-11-25 call is sent again as a task.
                let creation = task_of_creation(&raw, Era::Legacy);
                if matches!(creation, Creation::Task(_)) && self.support.len() < MAX_TOOLS {
                    // It is a task tool: the next call asks at once.
                    self.support.insert(retrying.name, TaskSupport::Required);
                }
                let creating = retrying.creating;
                self.created(cx, app, id, creating, creation, raw)
            }
            Err(RequestError::Timeout { ms }) => {
                // The caller's timeout, not the time that was left.
                let ms = asked.map_or(ms, |t| t.as_millis() as u64);
                Some((app, Err(RequestError::Timeout { ms })))
            }
            // Refused as a task too: the tool takes none; the first
            // refusal says more.
            Err(RequestError::Remote(e)) if TASK_REQUIRED_CODES.contains(&e.code) => {
                Some((app, Err(RequestError::Remote(retrying.refused))))
            }
            Err(e) => Some((app, Err(e))),
        };
        if let Some((id_app, outcome)) = delivered {
            self.alias.remove(&id);
            cx.out.push_back(Output::Complete {
                id: id_app,
                outcome,
            });
        }
    }

    /// 2025-11-25: remembers the tools' task support from a `tools/list` page.
    pub(super) fn read_support(&mut self, raw: &RawValue) {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Value>,
        }
        let Ok(page) = serde_json::from_str::<Page>(raw.get()) else {
            return;
        };
        for tool in page.tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            // Forbidden is kept too: a tool listed is a tool known (one
            // not listed may be retried as a task when refused).
            let support = TaskSupport::of_value(&tool);
            if self.support.len() < MAX_TOOLS || self.support.contains_key(name) {
                self.support.insert(name.to_owned(), support);
            }
        }
    }
}

/// The task a `tools/call` result created, if it is one, in the shape of
/// the era spoken: 2026-07-28 `resultType: "task"` with the task's fields
/// beside it; 2025-11-25 `{task: {taskId, …}}`. A plain result is only
/// scanned, never built.
fn task_of_creation(raw: &RawValue, era: Era) -> Creation {
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(rename = "resultType", default, borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
        #[serde(default, borrow)]
        task: Option<&'a RawValue>,
    }
    let Ok(shape) = serde_json::from_str::<Shape<'_>>(raw.get()) else {
        return Creation::NotTask;
    };
    let parsed = if era == Era::Modern {
        if shape.result_type.as_deref() != Some("task") {
            return Creation::NotTask;
        }
        serde_json::from_str::<Task>(raw.get())
    } else {
        let Some(task) = shape.task else {
            return Creation::NotTask;
        };
        match serde_json::from_str::<Value>(task.get()) {
            Ok(v) if v.get("taskId").is_some_and(Value::is_string) => serde_json::from_value(v),
            _ => return Creation::NotTask,
        }
    };
    match parsed {
        Ok(task) => Creation::Task(task),
        Err(e) => Creation::Invalid(e.to_string()),
    }
}

/// `params` of `tools/call` asking for a task (2025-11-25 `task: {ttl}`).
fn with_task(mut params: Value, options: &RequestOptions) -> Option<Value> {
    let mut task = Map::new();
    if let Some(ttl) = options.task_ttl {
        task.insert("ttl".into(), Value::from(ttl.as_millis() as u64));
    }
    params
        .as_object_mut()?
        .entry("task")
        .or_insert(Value::Object(task));
    Some(params)
}
