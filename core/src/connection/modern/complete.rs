//! A 2026-07-28 call's completion: a result, an `input_required` round to
//! answer and retry, a lost stream to re-issue, or the end.

use super::*;
use crate::modern::ResultType;

impl Modern {
    // ---- completions --------------------------------------------------------

    /// An engine completion: the listen request's end, an
    /// `input_required` round, or a result for the application (returned,
    /// under the application's id).
    pub(in crate::connection) fn complete(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        client: &ClientConfig,
        id: u64,
        outcome: Outcome,
    ) -> Option<(u64, Outcome)> {
        if self.listen_id == Some(id) {
            self.listen_ended(now, ob.out, outcome);
            return None;
        }
        if self.replaced.remove(&id) {
            return None;
        }
        let tool_list = self.tool_lists.remove(&id);
        let lost = self.lost.remove(&id);
        let app = self.alias.remove(&id).unwrap_or(id);
        let outcome = match outcome {
            Ok(raw) if tool_list => Ok(self.tool_list_headers(ob, raw)),
            Ok(_) if self.stand_ins.remove(&app) => Ok(empty_result()),
            o => o,
        };
        self.stand_ins.remove(&app);
        let Some(call) = self.calls.get_mut(&app) else {
            return Some((app, outcome));
        };
        if call.engine_id != Some(id) {
            // Not its request in flight (cannot happen: one at a time).
            return Some((app, outcome));
        }
        call.engine_id = None;
        let raw = match outcome {
            Ok(raw) => raw,
            Err(e) if lost && call.reissues < MAX_REISSUES && !self.closed => {
                call.reissues += 1;
                let n = call.reissues;
                let delay = REISSUE_BACKOFF.saturating_mul(1 << (n - 1));
                // Never past the call's deadline: it fails then.
                let at = now.checked_add(delay).unwrap_or(now);
                let at = call.deadline.map_or(at, |d| at.min(d));
                self.reissue_at.push((at, app));
                ob.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "{e}; issuing it again with a new id in {} ms (attempt {n} of {MAX_REISSUES})",
                    delay.as_millis()
                ))));
                return None;
            }
            Err(RequestError::Transport { .. }) if lost => {
                // Every attempt lost its stream: say so, under the id the
                // application knows (the transport named the last
                // attempt's).
                let reissues = call.reissues;
                let attempts = reissues + 1;
                self.calls.remove(&app);
                let message = format!(
                    "the response stream of request {app} ended before its response \
                     {attempts} times (issued again {reissues} times with new ids); giving up"
                );
                return Some((app, Err(RequestError::Transport { message })));
            }
            Err(e) => {
                self.calls.remove(&app);
                return Some((app, Err(e)));
            }
        };
        if !call.mrtr {
            // A relayed call's input round (or task) is no result to keep.
            if !call.options.relay || ResultType::of_raw(&raw) == ResultType::Complete {
                self.cache.store(call.id, &call.params, &raw, now);
            }
            self.calls.remove(&app);
            return Some((app, Ok(raw)));
        }
        let Ok(value) = serde_json::from_str::<Value>(raw.get()) else {
            self.calls.remove(&app);
            return Some((app, Ok(raw)));
        };
        let fail = |message: String| Some((app, Err(RequestError::Transport { message })));
        match classify(&call.method, &value) {
            Ok(ResultKind::Complete) => {
                if call.rounds == 0 {
                    self.cache.store(call.id, &call.params, &raw, now);
                }
                self.calls.remove(&app);
                Some((app, Ok(raw)))
            }
            Ok(ResultKind::Unknown(t)) if t == "task" && call.id == Some(MethodId::CallTool) => {
                self.calls.remove(&app);
                if client.tasks {
                    // The tasks extension: the connection's tasks follow it.
                    Some((app, Ok(raw)))
                } else {
                    fail(
                        "the server answered with a task, but this client does not declare \
                         the tasks extension (ConnectOptions::tasks(false))"
                            .to_owned(),
                    )
                }
            }
            Ok(ResultKind::Unknown(t)) => {
                self.calls.remove(&app);
                fail(format!(
                    "the server answered with an unknown resultType {t:?}"
                ))
            }
            Err(e) => {
                self.calls.remove(&app);
                fail(format!("invalid input_required result: {e}"))
            }
            Ok(ResultKind::InputRequired(_)) if self.closed => {
                self.calls.remove(&app);
                let reason = "the connection closed during the server's input round".to_owned();
                Some((app, Err(RequestError::Closed { reason })))
            }
            Ok(ResultKind::InputRequired(asked)) => {
                call.rounds += 1;
                if call.rounds > MAX_INPUT_ROUNDS {
                    self.calls.remove(&app);
                    return fail(format!(
                        "the server asked for input {MAX_INPUT_ROUNDS} times in a row; giving up"
                    ));
                }
                let handled = client.handled_requests();
                if let Some((key, r)) = asked
                    .input_requests
                    .iter()
                    .find(|(_, r)| !handled.contains(&r.method()))
                {
                    let message = format!(
                        "the server asked for {} (input {key:?}), which this client did not declare",
                        r.method()
                    );
                    self.calls.remove(&app);
                    return fail(message);
                }
                let round = call.rounds;
                call.responses = Map::new();
                call.awaiting = asked.input_requests.keys().cloned().collect();
                let requests: Vec<(String, InputRequest)> = asked
                    .input_requests
                    .iter()
                    .map(|(k, r)| (k.clone(), r.clone()))
                    .collect();
                call.asked = Some(asked);
                if requests.is_empty() {
                    self.retry(now, ob, app);
                    return None;
                }
                for (key, r) in requests {
                    let rid = RequestId::String(format!("input-{app}-{round}-{key}"));
                    let params = match &r {
                        InputRequest::Elicitation { params }
                        | InputRequest::Sampling { params } => {
                            serde_json::value::to_raw_value(params).ok()
                        }
                        InputRequest::Other {
                            params: Some(params),
                            ..
                        } => serde_json::value::to_raw_value(params).ok(),
                        _ => None,
                    };
                    self.inputs.open(rid.clone(), app, key);
                    ob.out.push_back(Output::ServerRequest {
                        id: rid,
                        method: r.method().to_owned(),
                        params,
                    });
                }
                None
            }
        }
    }

    /// A `tools/list` page over HTTP: records each tool's `x-mcp-header`
    /// annotations and leaves out the tools whose annotations are invalid
    /// (the spec says they MUST be excluded).
    pub(super) fn tool_list_headers(
        &mut self,
        ob: &mut Outbox<'_>,
        raw: Box<RawValue>,
    ) -> Box<RawValue> {
        if !ob.wire.is_http() {
            return raw;
        }
        let Ok(mut page) = serde_json::from_str::<Value>(raw.get()) else {
            return raw;
        };
        let Some(tools) = page.get_mut("tools").and_then(Value::as_array_mut) else {
            return raw;
        };
        let before = tools.len();
        let mut dropped = Vec::new();
        tools.retain(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            let schema = t.get("inputSchema").unwrap_or(&Value::Null);
            match param_headers(schema) {
                Ok(specs) => {
                    self.tools.record(name, specs);
                    true
                }
                Err(e) => {
                    dropped.push(format!("{name:?}: {e}"));
                    false
                }
            }
        });
        if tools.len() == before {
            return raw;
        }
        for d in dropped {
            ob.out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "tool {d} (invalid x-mcp-header annotation): left out of tools/list"
                ))));
        }
        serde_json::value::to_raw_value(&page).unwrap_or(raw)
    }

    /// Sends call `app` again with the inputs and the echoed state.
    pub(super) fn retry(&mut self, now: Instant, ob: &mut Outbox<'_>, app: u64) {
        let Some(call) = self.calls.get_mut(&app) else {
            return;
        };
        let asked = call.asked.take().unwrap_or(InputRequired {
            input_requests: Default::default(),
            request_state: None,
        });
        let responses = std::mem::take(&mut call.responses);
        let params = retry_params(&call.params, &asked, responses)
            .map_err(|e| e.to_string())
            .and_then(|p| with_meta(Some(p), &self.meta).map_err(|e| e.to_string()));
        let method = call.method.clone();
        let options = call.options;
        let sent = params.and_then(|params| {
            let raw = serde_json::value::to_raw_value(&params).map_err(|e| e.to_string())?;
            let id = ob
                .engine
                .request(now, &method, Some(&raw), options)
                .map_err(|e| e.to_string())?;
            ob.wire
                .note_request(id, &method, Some(&params), &self.tools);
            Ok((id, params))
        });
        match sent {
            Ok((id, params)) => {
                self.alias.insert(id, app);
                if let Some(call) = self.calls.get_mut(&app) {
                    call.engine_id = Some(id);
                    call.sent = params;
                }
            }
            Err(e) => {
                let message = format!("could not send the call again with its inputs: {e}");
                let error = Err(RequestError::Transport { message });
                self.end_call(ob.out, app, error, "failed");
            }
        }
    }
}

/// `{}`: the result of a method that has none.
fn empty_result() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("JSON")
}
