//! 2026-07-28 `input_required`: the server's questions surfaced to the
//! application, kept in step with the task's state, and answered in one
//! `tasks/update`.

use super::*;

impl Tasks {
    /// 2026-07-28: keeps task `app`'s open questions in step with the
    /// server's last state (`asked`: its `inputRequests`, `None` when it
    /// asks nothing). A question no longer asked is withdrawn and its
    /// answer never sent (each key of `tasks/update` MUST be outstanding);
    /// it is forgotten, so a later state that asks it again is asked anew.
    pub(super) fn reconcile(
        &mut self,
        out: &mut VecDeque<Output>,
        app: u64,
        asked: Option<&Map<String, Value>>,
    ) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.pending.is_empty() && f.responses.is_empty() {
            return;
        }
        let still = |k: &str| asked.is_some_and(|m| m.contains_key(k));
        let gone: BTreeSet<String> = f.pending.iter().filter(|k| !still(k)).cloned().collect();
        f.pending.retain(|k| still(k));
        let unsent: Vec<String> = f.responses.keys().filter(|k| !still(k)).cloned().collect();
        for k in gone.iter().chain(&unsent) {
            f.seen.remove(k);
            f.responses.remove(k);
        }
        if !gone.is_empty() {
            let why = "the server no longer asks for it";
            self.inputs.withdraw(out, app, |k| gone.contains(k), why);
        }
    }

    /// Sends task `app`'s answers in one `tasks/update`.
    pub(super) fn send_update(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        let responses = std::mem::take(&mut f.responses);
        f.updating = responses.keys().cloned().collect();
        let params = serde_json::json!({
            "taskId": f.task_id,
            "inputResponses": responses,
        });
        let options = f.request_options(now, Purpose::Update);
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Update,
            params,
            options,
        });
    }

    /// 2026-07-28 `input_required`: each question not seen before goes to
    /// the application as a server request.
    pub(super) fn ask(&mut self, cx: &mut Ctx<'_>, app: u64, task: &Task) -> Result<(), String> {
        let Some(requests) = task.input_requests() else {
            return Ok(());
        };
        // A task followed twice is asked once (by the first to see it).
        let elsewhere: BTreeSet<String> = self
            .follows
            .iter()
            .filter(|(a, f)| **a != app && f.task_id == task.task_id)
            .flat_map(|(_, f)| f.seen.iter().cloned())
            .collect();
        let Some(f) = self.follows.get_mut(&app) else {
            return Ok(());
        };
        let handled = cx.client.handled_requests();
        for (key, request) in requests {
            if f.seen.contains(key) || elsewhere.contains(key) {
                continue;
            }
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("task {}: input {key:?} has no method", f.task_id))?;
            if !handled.contains(&method) {
                return Err(format!(
                    "task {} asked for {method} (input {key:?}), which this client did not declare",
                    f.task_id
                ));
            }
            if f.seen.len() >= MAX_INPUT_KEYS {
                return Err(format!("task {} asked for too many inputs", f.task_id));
            }
            f.seen.insert(key.clone());
            f.pending.insert(key.clone());
            let params = request
                .get("params")
                .and_then(|p| serde_json::value::to_raw_value(p).ok());
            f.asked += 1;
            let rid = RequestId::String(format!("task-input-{app}-{}-{key}", f.asked));
            self.inputs.open(rid.clone(), app, key.clone());
            cx.out.push_back(Output::ServerRequest {
                id: rid,
                method: method.to_owned(),
                params,
            });
        }
        Ok(())
    }

    /// An answer to a task's input, if `id` is one; `None` otherwise.
    pub(in crate::connection) fn respond(
        &mut self,
        now: Instant,
        out: &mut VecDeque<Output>,
        id: &RequestId,
        response: &Result<Box<RawValue>, ErrorObject>,
    ) -> Option<RespondStatus> {
        let (app, key) = match self.inputs.answer(id) {
            Ok(open) => open,
            // One of ours withdrawn lately; any other id is not ours.
            Err(withdrawn) => return withdrawn.then_some(RespondStatus::Withdrawn),
        };
        let Some(f) = self.follows.get_mut(&app) else {
            return Some(RespondStatus::Withdrawn);
        };
        let answer = match response {
            Ok(raw) => serde_json::from_str::<Value>(raw.get())
                .map_err(|e| format!("its answer is not JSON: {e}")),
            Err(e) => Err(e.message.clone()),
        };
        match answer {
            Ok(v) => {
                f.pending.remove(&key);
                f.responses.insert(key, v);
                if f.pending.is_empty() {
                    self.send_update(now, app);
                }
            }
            Err(message) => {
                let message = format!(
                    "the application could not answer input {key:?} of task {}: {message}",
                    f.task_id
                );
                let error = Err(RequestError::Transport { message });
                self.end(out, app, error, "answer failed", true);
            }
        }
        Some(RespondStatus::Sent)
    }
}
