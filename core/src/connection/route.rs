//! Routing between the engine, the wire, the authorization flow, the
//! era's sub-states and the application, until all are quiet.

use super::*;

/// A request's end, as the engine gives it.
type Outcome = Result<Box<RawValue>, RequestError>;

impl Connection {
    // ----- routing ------------------------------------------------------

    /// Moves outputs between engine, wire, authorization and the app until
    /// all are quiet.
    pub(super) fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = self.send_for_tasks(now);
            if self.era.modern().is_some() {
                moved |= self.route_modern_ended(now);
            }
            while let Some(o) = self.engine.poll_output() {
                moved = true;
                self.route_engine(now, o);
            }
            while let Some(o) = self.wire.poll_output() {
                moved = true;
                self.route_wire(now, o);
            }
            while let Some(step) = self.auth.as_mut().and_then(Auth::poll_output) {
                moved = true;
                self.route_auth(now, step);
            }
            if !moved {
                break;
            }
        }
        if self.ready_pending && self.phase == Phase::Ready && self.wire.settled() {
            self.ready_pending = false;
            self.out.push_back(Output::Ready);
        }
        if self.phase == Phase::Closing && self.wire.is_closed() {
            self.finish();
        }
    }

    pub(super) fn route_engine(&mut self, now: Instant, o: rpc::Output) {
        match o {
            rpc::Output::Send { bytes, kind } => {
                if let (true, SendKind::Request { id }, Some(auth)) =
                    (self.wire.auth_pending(), &kind, self.auth.as_mut())
                {
                    if self.engine.suspend_timeout(*id) {
                        auth.hold(*id);
                    }
                }
                if let Some(line) = self.wire.send(now, bytes, kind) {
                    self.out.push_back(Output::Write(line));
                }
            }
            rpc::Output::Complete { id, outcome } => self.complete(now, id, outcome),
            rpc::Output::Progress { id, progress } => {
                let id = self.app_id(id);
                self.out.push_back(Output::Progress { id, progress })
            }
            rpc::Output::ServerRequest { id, method, params } => self
                .out
                .push_back(Output::ServerRequest { id, method, params }),
            rpc::Output::ServerRequestCancelled { id, reason } => self
                .out
                .push_back(Output::ServerRequestCancelled { id, reason }),
            rpc::Output::Notification { method, params } => {
                if let Some(m) = self.era.modern_mut() {
                    if m.is_internal_notification(&method) {
                        return m.subscription_acknowledged(&mut self.out, params.as_deref());
                    }
                    m.notified(&method, params.as_deref());
                }
                self.tasks
                    .notified(task_cx!(self, now), &method, params.as_deref());
                self.out
                    .push_back(Output::Notification(ServerNotification::parse(
                        method, params,
                    )))
            }
            rpc::Output::Diagnostic(d) => {
                self.out.push_back(Output::Diagnostic(Diagnostic::Rpc(d)))
            }
            // We closed the engine ourselves (shut_down); `Closed` is ours
            // to emit once the transport is done.
            rpc::Output::Closed { .. } => {}
        }
    }

    /// The way a completion of the engine travels to the application.
    /// Each stage either takes it (it is then that stage's to finish) or
    /// passes it on, perhaps under another id:
    ///
    /// ```text
    ///   engine ─► wire: the request is done
    ///          ─► probe: server/discover decides the era (or a late one is dropped)
    ///          ─► 2026-07-28 state: input_required rounds, re-issues  (Modern::complete)
    ///          ─► tasks: a call that became a task is followed       (Tasks::complete)
    ///          ─► handshake: initialize ends the handshake, never the application's
    ///          ─► application: Output::Complete
    /// ```
    ///
    /// What the 2026-07-28 state ends by itself enters at the tasks stage
    /// ([`Connection::route_modern_ended`]).
    fn complete(&mut self, now: Instant, id: u64, outcome: Outcome) {
        self.wire.request_done(id);
        if self.prober.is_probe(id) {
            return self.on_probe(now, outcome);
        }
        if self.prober.take_abandoned(id) {
            return;
        }
        let (id, outcome) = match self.era.modern_mut() {
            Some(m) => match m.complete(now, outbox!(self), &self.client, id, outcome) {
                Some(delivered) => delivered,
                None => return,
            },
            None => (id, outcome),
        };
        let Some((id, outcome)) = self.tasks.complete(task_cx!(self, now), id, outcome) else {
            return;
        };
        if self.initialize_id == Some(id) {
            self.initialize_id = None;
            // Closing: the handshake is over, and the app never saw this id.
            if let Phase::Initializing { reinit, .. } = self.phase {
                self.on_initialize(now, outcome, reinit);
            }
            return;
        }
        if let (Ok(_), Some(auth)) = (&outcome, self.auth.as_mut()) {
            auth.succeeded();
        }
        self.out.push_back(Output::Complete { id, outcome });
    }

    pub(super) fn route_wire(&mut self, now: Instant, output: WireOutput) {
        match output {
            WireOutput::Output(o) => self.out.push_back(o),
            WireOutput::Http(mut r) => {
                r.carries = r.carries.map(|id| self.app_id(id));
                self.out.push_back(Output::Http(Box::new(r)))
            }
            WireOutput::Fail { id, error } => {
                self.engine.fail(now, id, error);
            }
            WireOutput::Lost { id, error } => {
                if let Some(m) = self.era.modern_mut() {
                    m.stream_lost(id);
                }
                self.engine.fail(now, id, error);
            }
            WireOutput::Oversize {
                glimpse,
                error,
                diagnostic,
            } => {
                if let Some(d) = diagnostic {
                    self.out.push_back(Output::Diagnostic(d));
                }
                self.engine.handle_oversize(now, &glimpse, error);
            }
            WireOutput::Fatal(m) => self.shut_down(now, CloseReason::Transport(m)),
            WireOutput::SessionExpired => self.reinitialize(now),
            WireOutput::FallbackToLegacy { resend } => self.fall_back(now, resend),
            WireOutput::AuthRequired {
                status,
                challenges,
                hints,
                request,
            } => self.on_auth_required(now, status, &challenges, &hints, request),
        }
    }

    pub(super) fn route_auth(&mut self, now: Instant, step: AuthStep) {
        match step {
            AuthStep::Output(o) => self.out.push_back(o),
            AuthStep::Authorized(state) => {
                let dpop = self.auth.as_ref().and_then(|a| a.dpop_of(&state));
                self.wire.set_dpop(dpop);
                self.wire.authorized(now, state.authorization());
                self.out.push_back(Output::Authorized(Box::new(state)));
                self.resume_suspended(now);
            }
            AuthStep::Adopted(state) => {
                let dpop = self.auth.as_ref().and_then(|a| a.dpop_of(&state));
                self.wire.set_dpop(dpop);
                self.wire.authorized(now, state.authorization());
                self.resume_suspended(now);
            }
            AuthStep::Failed(message) => {
                self.wire.authorization_failed(&message);
                self.resume_suspended(now);
            }
        }
    }

    /// The application's id of engine request `id` (they differ for the
    /// retries of a 2026-07-28 call).
    pub(super) fn app_id(&self, id: u64) -> u64 {
        if let Some(app) = self.tasks.app_id(id) {
            return app;
        }
        self.era.modern().map_or(id, |m| m.app_id(id))
    }

    // ----- messages the connection builds ---------------------------------

    /// Notes the era headers of request `id` just built.
    pub(super) fn note_request(&mut self, id: u64, method: &str, params: Option<Json<'_>>) {
        let tools = self.era.modern().map(Modern::tools);
        self.wire.note_raw_request(id, method, params, tools);
    }

    /// Has the engine build notification `method`, noting its era headers.
    pub(super) fn notify_engine(
        &mut self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), LocalError> {
        let tools = self.era.modern().map(Modern::tools);
        self.wire.note_notification(method, params, tools);
        let sent = self.engine.notify(method, params);
        if sent.is_err() {
            self.wire.forget_notification();
        }
        sent
    }

    /// Calls the 2026-07-28 sub-state ended by itself (a re-issue or an
    /// input round that could not go on, a cancel between requests, the
    /// close): through the tasks sub-state, which may own them, to the
    /// application. Whether there were any.
    pub(super) fn route_modern_ended(&mut self, now: Instant) -> bool {
        let ended = match self.era.modern_mut() {
            Some(m) => m.take_ended(),
            None => return false,
        };
        if ended.is_empty() {
            return false;
        }
        for (id, outcome) in ended {
            if let Some((id, outcome)) = self.tasks.complete(task_cx!(self, now), id, outcome) {
                self.out.push_back(Output::Complete { id, outcome });
            }
        }
        true
    }

    /// Sends what the tasks sub-state queued (stamped for the era) and
    /// cancels what it no longer waits for. Whether anything moved.
    pub(super) fn send_for_tasks(&mut self, now: Instant) -> bool {
        if !self.tasks.has_work() {
            // The common case: no task in sight.
            return false;
        }
        let mut moved = false;
        for (id, keep) in self.tasks.take_lingers() {
            if keep {
                self.engine.linger_progress(id);
            } else {
                self.engine.end_progress(id);
            }
        }
        for id in self.tasks.take_drops() {
            moved = true;
            let done = self
                .era
                .modern_mut()
                .and_then(|m| m.cancel(now, outbox!(self), id, "no longer needed"));
            if done.is_none() {
                self.engine.cancel(now, id, "no longer needed");
            }
        }
        if self.phase != Phase::Ready {
            return moved;
        }
        if let Some(ids) = self.tasks.take_watch_change() {
            if let (Some(m), true) = (self.era.modern_mut(), self.listen_enabled) {
                m.watch_tasks(now, outbox!(self), ids);
            }
        }
        while let Some(send) = self.tasks.next_send(now) {
            moved = true;
            let method = send.method();
            let raw = serde_json::value::to_raw_value(&send.params).expect("JSON serializes");
            let sent = match self.era.modern_mut() {
                Some(m) => {
                    let id = Some(send.method_id());
                    m.request(
                        now,
                        outbox!(self),
                        method,
                        id,
                        Some(Json::from(&*raw)),
                        send.options,
                    )
                }
                None => match self.engine.request(now, method, Some(&raw), send.options) {
                    Ok(id) => {
                        self.note_request(id, method, Some(Json::from(&*raw)));
                        Ok(id)
                    }
                    Err(e) => Err(e.into()),
                },
            };
            match sent {
                Ok(id) => self.tasks.sent(id, &send),
                Err(e) => self.tasks.send_failed(&mut self.out, &send, e.to_string()),
            }
        }
        moved
    }
}
