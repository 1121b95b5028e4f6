//! Following a task to its end: polls and their answers, status
//! notifications, deadlines, and what each status asks for.

use super::*;

impl Tasks {
    // ---- timers -----------------------------------------------------------------

    /// When a poll or a deadline is due next.
    pub(in crate::connection) fn poll_timeout(&self) -> Option<Instant> {
        if self.follows.is_empty() && self.calls.is_empty() {
            // No task in sight (the common case).
            return None;
        }
        let follows = self
            .follows
            .values()
            .flat_map(|f| {
                [
                    f.poll_at.filter(|_| f.in_flight.is_none()),
                    f.deadline,
                    f.gives_up.map(|(at, _)| at),
                ]
            })
            .flatten();
        // Calls waiting to be sent again as tasks (a 2025-11-25 session
        // starting over): their deadline (once sent, the engine's).
        let queued = self
            .calls
            .values()
            .filter(|r| r.id.is_none())
            .filter_map(|r| r.creating.deadline);
        follows.chain(queued).min()
    }

    /// Deadlines over: the task is cancelled and the call times out; polls
    /// due: `tasks/get`.
    pub(in crate::connection) fn handle_timeout(
        &mut self,
        now: Instant,
        out: &mut VecDeque<Output>,
    ) {
        let queued: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, r)| r.id.is_none() && r.creating.deadline.is_some_and(|d| d <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in queued {
            let error = timed_out(&self.calls[&app].creating.options);
            self.end_retry(out, app, Err(error), false);
        }
        let late: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.deadline.is_some_and(|d| d <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in late {
            let error = timed_out(&self.follows[&app].options);
            self.end(out, app, Err(error), "timed out", true);
        }
        let expired: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.gives_up.is_some_and(|(at, _)| at <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in expired {
            let f = &self.follows[&app];
            let waited = now.saturating_duration_since(f.since).as_secs();
            let state = f.told.as_ref().map_or("not ended".to_owned(), |(s, _)| {
                format!("{s:?}").to_lowercase()
            });
            let why = match f.gives_up.map(|(_, why)| why) {
                Some(GiveUp::Ttl(ms)) if ms % 1000 == 0 => format!(
                    "it outlived its ttl of {} s, the time the server keeps it",
                    ms / 1000
                ),
                Some(GiveUp::Ttl(ms)) => {
                    format!("it outlived its ttl of {ms} ms, the time the server keeps it")
                }
                _ => format!(
                    "the client waits for a task at most {} s (ClientConfig::max_task_wait)",
                    self.max_wait.map_or(0, |d| d.as_secs())
                ),
            };
            let error = RequestError::TaskExpired {
                task_id: f.task_id.clone(),
                message: format!(
                    "task {} given up after {waited} s, still {state}: {why}; it was cancelled",
                    f.task_id
                ),
            };
            self.end(out, app, Err(error), "given up", true);
        }
        let due: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.in_flight.is_none() && f.poll_at.is_some_and(|t| t <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in due {
            self.poll(now, app);
        }
    }

    /// Asks the server to cancel task `task_id` (nobody follows it).
    pub(super) fn queue_cancel(&mut self, app: u64, task_id: &str) {
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Cancel,
            params: serde_json::json!({ "taskId": task_id }),
            options: RequestOptions::default(),
        });
    }

    pub(super) fn poll(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        f.poll_at = None;
        let options = f.request_options(now, Purpose::Get);
        let params = serde_json::json!({ "taskId": f.task_id });
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Get,
            params,
            options,
        });
    }

    pub(super) fn ours_done(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        id: u64,
        purpose: Purpose,
        outcome: Outcome,
    ) {
        if purpose == Purpose::Call {
            return self.call_done(cx, app, id, outcome);
        }
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.in_flight == Some(id) {
            f.in_flight = None;
        }
        match (purpose, outcome) {
            (Purpose::Cancel | Purpose::Call, _) => {}
            (Purpose::Update, Ok(_)) => {
                f.updating.clear();
                f.update_failures = 0;
                if f.in_flight.is_none() && f.poll_at.is_none() {
                    f.poll_at = cx.now.checked_add(f.interval);
                }
            }
            (Purpose::Update, Err(e)) => {
                // A task the server no longer knows needs no cancel.
                let gone = matches!(&e, RequestError::Remote(o) if o.code == -32602);
                if !gone && f.update_failures + 1 < MAX_UPDATE_FAILURES {
                    // Perhaps applied already (a re-issue), perhaps not:
                    // the next state says; what it still asks is asked
                    // again.
                    f.update_failures += 1;
                    for key in std::mem::take(&mut f.updating) {
                        f.seen.remove(&key);
                    }
                    cx.out
                        .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                            "tasks/update of task {} failed ({e}); polling it again",
                            f.task_id
                        ))));
                    if f.in_flight.is_none() {
                        self.poll(cx.now, app);
                    }
                    return;
                }
                let message = format!("tasks/update of task {} failed: {e}", f.task_id);
                let error = Err(RequestError::Transport { message });
                self.end(cx.out, app, error, "tasks/update failed", !gone);
            }
            (Purpose::Result, Err(e))
                if matches!(
                    e,
                    RequestError::Transport { .. }
                        | RequestError::Timeout { .. }
                        | RequestError::Http { .. }
                ) && f.result_failures + 1 < MAX_RESULT_FAILURES =>
            {
                // Not the task's own error: the task goes on; back to
                // polling (the spec allows it after a failed tasks/result).
                f.result_failures += 1;
                f.fetching = false;
                f.poll_at = cx.now.checked_add(f.interval);
                cx.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                        "tasks/result of task {} failed ({e}); polling it again",
                        f.task_id
                    ))));
            }
            (Purpose::Result, outcome) => self.end(cx.out, app, outcome, "done", false),
            (Purpose::Get, Ok(raw)) => {
                f.timeouts = 0;
                let value: Option<Value> = serde_json::from_str(raw.get()).ok();
                match value.as_ref().and_then(Task::from_value) {
                    Some(task) if task.task_id == f.task_id => {
                        self.apply(cx, app, task, Source::Polled)
                    }
                    _ => {
                        let message = format!(
                            "tasks/get of task {} answered with something that is not that task",
                            f.task_id
                        );
                        let error = Err(RequestError::Transport { message });
                        self.end(cx.out, app, error, "invalid tasks/get", true);
                    }
                }
            }
            (Purpose::Get, Err(RequestError::Timeout { .. }))
                if f.timeouts + 1 < MAX_POLL_TIMEOUTS =>
            {
                f.timeouts += 1;
                f.poll_at = cx.now.checked_add(f.interval);
            }
            (Purpose::Get, Err(e)) => self.end(cx.out, app, Err(e), "tasks/get failed", false),
        }
    }

    /// A task's state (a poll's answer, a notification, the creation):
    /// progress on a change, then what the status asks for.
    pub(super) fn apply(&mut self, cx: &mut Ctx<'_>, app: u64, task: Task, source: Source) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        // The server keeps the task `ttl` after its creation: past it
        // (and a second of grace) nothing will end it.
        if let Some(ms) = task.ttl_ms {
            let at = f
                .since
                .checked_add(Duration::from_millis(ms).saturating_add(TTL_GRACE));
            if let Some(at) = at.filter(|at| f.gives_up.is_none_or(|(g, _)| *at < g)) {
                f.gives_up = Some((at, GiveUp::Ttl(ms)));
            }
        }
        if let Some(ms) = task.poll_interval_ms {
            f.interval = Duration::from_millis(ms).clamp(MIN_POLL, MAX_POLL);
        }
        let state = (task.status, task.status_message.clone());
        if f.told.as_ref() != Some(&state) {
            f.told = Some(state);
            f.updates += 1;
            if f.options.progress {
                cx.out.push_back(Output::Progress {
                    id: app,
                    progress: Progress {
                        progress: f64::from(f.updates),
                        total: None,
                        message: Some(format!("task {}: {}", task.task_id, task.describe())),
                        task: serde_json::to_value(&task).ok(),
                    },
                });
            }
        }
        let modern = f.era == Era::Modern;
        if modern {
            // The questions still asked for are the ones of this state (an
            // input_required state that lists none says nothing of them).
            match (task.status, task.input_requests()) {
                (TaskStatus::InputRequired, None) => {}
                (TaskStatus::InputRequired, asked) => self.reconcile(cx.out, app, asked),
                _ => self.reconcile(cx.out, app, None),
            }
        }
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        match task.status {
            TaskStatus::Cancelled => {
                let reason = match &task.status_message {
                    Some(m) => format!("the server cancelled task {}: {m}", task.task_id),
                    None => format!("the server cancelled task {}", task.task_id),
                };
                self.end(
                    cx.out,
                    app,
                    Err(RequestError::Cancelled { reason }),
                    "cancelled",
                    false,
                );
            }
            TaskStatus::Completed | TaskStatus::Failed if modern => match terminal_outcome(&task) {
                Some(outcome) => self.end(cx.out, app, outcome, "done", false),
                None if source != Source::Polled || !f.refetched => {
                    // A creation or a push need not carry the result:
                    // tasks/get does (asked once more if its own answer
                    // lacked it).
                    f.refetched |= source == Source::Polled;
                    if f.in_flight.is_none() {
                        self.poll(cx.now, app);
                    } else {
                        f.fetch_now = true;
                    }
                }
                None => {
                    let message = format!(
                        "task {} is {} but carries no {}",
                        task.task_id,
                        task.status,
                        if task.status == TaskStatus::Completed {
                            "result"
                        } else {
                            "error"
                        }
                    );
                    let error = Err(RequestError::Transport { message });
                    self.end(cx.out, app, error, "invalid task", false);
                }
            },
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::InputRequired if !modern => {
                // 2025-11-25: the end (and the server's questions) come on
                // tasks/result.
                if !f.fetching {
                    f.fetching = true;
                    f.poll_at = None;
                    let options = f.request_options(cx.now, Purpose::Result);
                    let params = serde_json::json!({ "taskId": f.task_id });
                    self.sends.push_back(Send {
                        app,
                        purpose: Purpose::Result,
                        params,
                        options,
                    });
                }
            }
            TaskStatus::InputRequired => {
                if let Err(message) = self.ask(cx, app, &task) {
                    let error = Err(RequestError::Transport { message });
                    self.end(cx.out, app, error, "input not possible", true);
                    return;
                }
                self.schedule(cx.now, app);
            }
            _ => self.schedule(cx.now, app),
        }
        // Answers go once this state's new questions are out too.
        if let Some(f) = self.follows.get(&app) {
            if modern && f.pending.is_empty() && !f.responses.is_empty() {
                self.send_update(cx.now, app);
            }
        }
    }

    /// The next poll after the interval (at once when an end was said
    /// without its result).
    pub(super) fn schedule(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.in_flight.is_some() || f.fetching || f.poll_at.is_some() {
            return;
        }
        if std::mem::take(&mut f.fetch_now) {
            self.poll(now, app);
        } else {
            f.poll_at = now.checked_add(f.interval);
        }
    }

    // ---- notifications -------------------------------------------------------------

    /// A server notification: a status change of a task followed counts as
    /// a poll's answer.
    pub(in crate::connection) fn notified(
        &mut self,
        cx: &mut Ctx<'_>,
        method: &str,
        params: Option<&RawValue>,
    ) {
        if !matches!(method, notifications::TASK_STATUS | notifications::TASKS)
            || self.follows.is_empty()
        {
            return;
        }
        let Some(task) = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .as_ref()
            .and_then(Task::from_value)
        else {
            return;
        };
        // Every follow of that task (it may be awaited twice).
        let apps: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.task_id == task.task_id)
            .map(|(app, _)| *app)
            .collect();
        for app in apps {
            self.apply(cx, app, task.clone(), Source::Pushed);
        }
    }

    /// The 2026-07-28 task ids followed, when they changed since the last
    /// call (for the `subscriptions/listen` filter).
    pub(in crate::connection) fn take_watch_change(&mut self) -> Option<BTreeSet<String>> {
        if !std::mem::take(&mut self.watch_changed) {
            return None;
        }
        let ids = self
            .follows
            .values()
            .filter(|f| f.modern())
            .map(|f| f.task_id.clone())
            .collect();
        Some(ids)
    }
}

/// A 2026-07-28 terminal task's inline result or error.
fn terminal_outcome(task: &Task) -> Option<Outcome> {
    match task.status {
        TaskStatus::Completed => {
            let result = task.inline_result()?;
            serde_json::value::to_raw_value(result).ok().map(Ok)
        }
        TaskStatus::Failed => {
            let error = task.inline_error()?;
            let error: ErrorObject = serde_json::from_value(error.clone()).ok()?;
            Some(Err(RequestError::Remote(error)))
        }
        _ => None,
    }
}
