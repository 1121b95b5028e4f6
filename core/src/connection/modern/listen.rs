//! `subscriptions/listen`: the filter (list changes, resource URIs, task
//! ids), its acknowledgement, and the stream opened again when it ends.

use super::*;

impl Modern {
    // ---- subscriptions/listen ---------------------------------------------

    /// When `subscriptions/listen` is to be opened again or a call is to
    /// be issued again, whichever is first.
    pub(in crate::connection) fn poll_timeout(&self) -> Option<Instant> {
        let reissue = self.reissue_at.iter().map(|(t, _)| *t).min();
        let ack = self.awaiting_ack.iter().map(|(_, _, t)| *t).min();
        [self.listen_retry, reissue, ack]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the reopening of `subscriptions/listen` is due at `now`
    /// (then it is no longer pending: open it).
    pub(in crate::connection) fn take_listen_due(&mut self, now: Instant) -> bool {
        let due = self.listen_retry.is_some_and(|t| t <= now);
        if due {
            self.listen_retry = None;
        }
        due
    }

    /// Opens `subscriptions/listen` for the list changes the server
    /// announces in `caps` (if `enabled`).
    pub(in crate::connection) fn open_listen(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        caps: &ServerCapabilities,
        enabled: bool,
    ) {
        let mut wanted = Map::new();
        if caps.tools.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("toolsListChanged".into(), Value::Bool(true));
        }
        if caps.prompts.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("promptsListChanged".into(), Value::Bool(true));
        }
        if caps.resources.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("resourcesListChanged".into(), Value::Bool(true));
        }
        self.listen_flags = if enabled { wanted } else { Map::new() };
        self.send_listen(now, ob);
    }

    /// Opens `subscriptions/listen` with the current filter (list-change
    /// flags and resource URIs), replacing the one open; none when the
    /// filter is empty.
    pub(super) fn relisten(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        if let Some(old) = self.listen_id.take() {
            self.replaced.insert(old);
            ob.engine.cancel(now, old, "subscription filter changed");
        }
        self.listen_retry = None;
        self.listen_reopens = 0;
        self.send_listen(now, ob);
    }

    pub(super) fn send_listen(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        let mut wanted = self.listen_flags.clone();
        if !self.resource_subs.is_empty() {
            let uris = self.resource_subs.iter().cloned().map(Value::String);
            wanted.insert("resourceSubscriptions".into(), Value::Array(uris.collect()));
        }
        if !self.task_ids.is_empty() && !self.no_task_push {
            let ids = self.task_ids.iter().cloned().map(Value::String);
            wanted.insert("taskIds".into(), Value::Array(ids.collect()));
        }
        if wanted.is_empty() {
            return;
        }
        let params = serde_json::json!({ "notifications": wanted });
        let Ok(params) = with_meta(Some(params), &self.meta) else {
            return;
        };
        let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
        // A subscription lasts as long as the connection: no deadline.
        let options = RequestOptions::default().timeout(Duration::MAX);
        match ob
            .engine
            .request(now, SUBSCRIPTIONS_LISTEN_METHOD, Some(&raw), options)
        {
            Ok(id) => {
                let method = SUBSCRIPTIONS_LISTEN_METHOD;
                ob.wire.note_request(id, method, Some(&params), &self.tools);
                self.listen_id = Some(id);
            }
            Err(e) => {
                ob.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                        "subscriptions/listen not sent: {e}"
                    ))));
                let message = format!("subscriptions/listen not sent: {e}");
                self.fail_acks(ob.out, &message);
            }
        }
    }

    /// `resources/subscribe` or `resources/unsubscribe` of the application
    /// (`params` its params): the URI joins or leaves the listen filter.
    pub(super) fn resource_subscription(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        subscribe: bool,
        params: Option<&Value>,
    ) -> Result<u64, CallError> {
        let uri = params
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .ok_or(LocalError::InvalidParams("a subscription needs a uri"))?
            .to_owned();
        let id = ob.engine.reserve_id()?;
        let changed = if subscribe {
            self.resource_subs.insert(uri.clone())
        } else {
            self.resource_subs.remove(&uri)
        };
        if subscribe {
            let deadline = now.checked_add(SUBSCRIBE_TIMEOUT).unwrap_or(now);
            self.awaiting_ack.push((id, uri, deadline));
        } else {
            let ok =
                serde_json::value::to_raw_value(&serde_json::json!({})).expect("JSON serializes");
            ob.out.push_back(Output::Complete {
                id,
                outcome: Ok(ok),
            });
        }
        if changed || (subscribe && self.listen_id.is_none()) {
            self.relisten(now, ob);
        }
        Ok(id)
    }

    /// The tasks followed changed: the listen filter asks for their status
    /// pushes (the stream is opened again with the new filter).
    pub(in crate::connection) fn watch_tasks(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        ids: BTreeSet<String>,
    ) {
        if ids == self.task_ids {
            return;
        }
        // A task that ended needs no new stream: it leaves with the next change.
        let added = ids.iter().any(|id| !self.task_ids.contains(id));
        self.task_ids = ids;
        if added && !self.no_task_push {
            self.relisten(now, ob);
        }
    }

    /// Subscribes still waiting fail with `message`.
    pub(super) fn fail_acks(&mut self, out: &mut VecDeque<Output>, message: &str) {
        for (id, uri, _) in std::mem::take(&mut self.awaiting_ack) {
            self.resource_subs.remove(&uri);
            let message = format!("subscribing to {uri}: {message}");
            out.push_back(Output::Complete {
                id,
                outcome: Err(RequestError::Transport { message }),
            });
        }
    }

    /// A server notification: drops the cached results it says changed.
    pub(in crate::connection) fn notified(&mut self, method: &str, params: Option<&RawValue>) {
        self.cache.invalidate(method, params);
    }

    /// Results answered from the cache so far.
    pub(in crate::connection) fn cache_hits(&self) -> u64 {
        self.cache.hits()
    }

    /// Whether `method` is the subscription's acknowledgement (not for the
    /// application).
    pub(in crate::connection) fn is_internal_notification(&self, method: &str) -> bool {
        method == notifications::SUBSCRIPTIONS_ACKNOWLEDGED
    }

    /// The subscription is (again) in place: its reopens start over, and
    /// the subscribes waiting for it complete (an error for a URI the
    /// server left out of the honoured filter).
    pub(in crate::connection) fn subscription_acknowledged(
        &mut self,
        out: &mut VecDeque<Output>,
        params: Option<&RawValue>,
    ) {
        self.listen_reopens = 0;
        let honoured: Option<BTreeSet<String>> = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|v| {
                let uris = v.get("notifications")?.get("resourceSubscriptions")?;
                let uris = uris.as_array()?.iter().filter_map(Value::as_str);
                Some(uris.map(str::to_owned).collect())
            });
        for (id, uri, _) in std::mem::take(&mut self.awaiting_ack) {
            // No honoured list at all: the server did not narrow the filter.
            let kept = honoured.as_ref().is_none_or(|h| h.contains(&uri));
            let outcome = if kept {
                Ok(serde_json::value::to_raw_value(&serde_json::json!({}))
                    .expect("JSON serializes"))
            } else {
                self.resource_subs.remove(&uri);
                Err(RequestError::Transport {
                    message: format!("the server did not accept the subscription to {uri}"),
                })
            };
            out.push_back(Output::Complete { id, outcome });
        }
    }

    /// Timers: calls to issue again, subscribes not acknowledged in time.
    pub(in crate::connection) fn handle_timeout(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        self.reissue_due(now, ob);
        if self.awaiting_ack.iter().any(|(_, _, t)| *t <= now) {
            let (late, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.awaiting_ack)
                .into_iter()
                .partition(|(_, _, t)| *t <= now);
            self.awaiting_ack = waiting;
            for (id, uri, _) in late {
                // The stream carries it all the same; the caller was told
                // it failed, so it is no longer asked for.
                self.resource_subs.remove(&uri);
                let ms = SUBSCRIBE_TIMEOUT.as_millis() as u64;
                ob.out.push_back(Output::Complete {
                    id,
                    outcome: Err(RequestError::Timeout { ms }),
                });
            }
        }
    }

    /// The listen request ended: unless the connection closed it, open it
    /// again after a backoff, a bounded number of times in a row.
    pub(super) fn listen_ended(
        &mut self,
        now: Instant,
        out: &mut VecDeque<Output>,
        outcome: Outcome,
    ) {
        self.listen_id = None;
        let why = match &outcome {
            Ok(_) => "the server ended it".to_owned(),
            Err(e) => e.to_string(),
        };
        self.fail_acks(out, &format!("subscriptions/listen ended ({why})"));
        if matches!(outcome, Err(RequestError::Closed { .. })) {
            return;
        }
        let refused = matches!(
            outcome,
            Err(RequestError::Remote(_) | RequestError::Http { .. })
        );
        if refused && !self.task_ids.is_empty() && !self.no_task_push {
            // Perhaps the server refuses `taskIds` (or has no listen at
            // all): the tasks are polled anyway. Whatever else the filter
            // asked for is asked again at once without them; nothing else
            // asked, nothing to say.
            self.no_task_push = true;
            self.listen_reopens = 0;
            if !self.listen_flags.is_empty() || !self.resource_subs.is_empty() {
                self.listen_retry = Some(now);
            }
            return;
        }
        let note = if self.listen_reopens < MAX_LISTEN_REOPENS {
            let delay = Duration::from_secs(1 << self.listen_reopens);
            self.listen_reopens += 1;
            self.listen_retry = now.checked_add(delay);
            format!("subscriptions/listen ended ({why}); opening it again in {delay:?}")
        } else {
            format!(
                "subscriptions/listen ended ({why}) {MAX_LISTEN_REOPENS} times in a row; \
                 going on without list-change notifications"
            )
        };
        out.push_back(Output::Diagnostic(Diagnostic::Transport(note)));
    }
}
