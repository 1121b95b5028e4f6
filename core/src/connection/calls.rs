//! The application's calls: requests, notifications, answers to the
//! server's requests, cancels and the close, each checked against the
//! phase and the server's capabilities first.

use super::*;

impl Connection {
    // ----- application calls -------------------------------------------

    /// Sends a request. Methods tied to a server capability are refused
    /// locally when the server did not declare it.
    pub fn request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        self.request_json(now, method, params.map(Json::from), options)
    }

    /// [`request`](Self::request) with params as [`Params`] (written by
    /// this crate's serializer: not parsed again on the way out).
    pub fn request_params(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&Params>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        self.request_json(now, method, params.map(Json::from), options)
    }

    fn request_json(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<Json<'_>>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        // The method is resolved once: every decision below reads its row.
        let id_of = MethodId::of(method);
        let spec = id_of.map(MethodId::spec);
        self.check_open(id_of)?;
        if let Some(server) = &self.server {
            check_spec(spec, &server.capabilities).map_err(|capability| {
                CallError::NotSupported {
                    method: method.to_string(),
                    capability: capability.name(),
                }
            })?;
        }
        let caps = self.server.as_ref().map(|s| &s.capabilities);
        let era = self.era.era();
        if era == Era::Modern && !self.client.tasks && spec.is_some_and(MethodSpec::is_task_method)
        {
            // The extension is not declared: the server would refuse.
            return Err(CallError::TurnedOff {
                method: method.to_owned(),
                what: "tasks are turned off for this client (ConnectOptions::tasks(false)), \
                       so the tasks extension is not declared",
            });
        }
        // Awaiting a task (checked only for that method: this is every
        // call's path).
        let awaits = (id_of == Some(MethodId::TaskResult))
            .then(|| caps.filter(|c| Capability::Tasks.declared_in(c)))
            .flatten();
        if let Some(caps) = awaits {
            // Awaiting a task: the connection follows it (both eras).
            let id = self.engine.reserve_id()?;
            self.tasks
                .await_task((now, era), id, params, options, caps)
                .map_err(LocalError::InvalidParams)?;
            self.pump(now);
            return Ok(id);
        }
        let augment = match (era, caps) {
            (Era::Legacy, Some(caps)) => self.tasks.augment(id_of, params, &options, caps),
            _ => Augment::Plain,
        };
        let params = match &augment {
            Augment::AsTask(p) => Some(Json::from(&**p)),
            _ => params,
        };
        let id = match self.era.modern_mut() {
            Some(m) => m.request(now, outbox!(self), method, id_of, params, options)?,
            None => {
                let id = self
                    .engine
                    .request_json(now, method, params, options, id_of)?;
                self.note_request(id, method, params);
                id
            }
        };
        if let Some(caps) = self.server.as_ref().map(|s| &s.capabilities) {
            self.tasks
                .requested((now, era), id, id_of, options, caps, augment);
        }
        self.pump(now);
        Ok(id)
    }

    /// Sends a request whose params are any serializable value.
    pub fn request_with<P: Serialize + ?Sized>(
        &mut self,
        now: Instant,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        let raw = serde_json::value::to_raw_value(params)
            .map_err(|_| CallError::Local(LocalError::InvalidParams("params do not serialize")))?;
        self.request(now, method, Some(&raw), options)
    }

    /// Sends the typed request `method` (any of [`crate::mcp::methods`]);
    /// its completion parses as `M::Result`. The one path to every MCP
    /// method: the adapters build on it, none writes a method name.
    ///
    /// ```
    /// # use std::time::Instant;
    /// use mcpwire::mcp::methods::CallTool;
    /// use mcpwire::{Connection, ConnectionConfig, TransportSpec};
    /// use mcpwire::rpc::RequestOptions;
    ///
    /// let now = Instant::now();
    /// let mut conn = Connection::new(ConnectionConfig::default(), TransportSpec::Stdio, now);
    /// // Before the handshake only ping may be sent.
    /// let call = CallTool::new("echo", serde_json::json!({"message": "hi"}));
    /// assert!(conn.send(now, &call, RequestOptions::default()).is_err());
    /// ```
    pub fn send<M: Method>(
        &mut self,
        now: Instant,
        method: &M,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        let params = method
            .params_json()
            .map_err(|_| CallError::Local(LocalError::InvalidParams("params do not serialize")))?;
        self.request_params(now, M::NAME, params.as_ref(), options)
    }

    /// Sends a notification (e.g. `notifications/roots/list_changed`).
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), CallError> {
        self.check_open(None)?;
        self.notify_engine(method, params)?;
        self.pump(now);
        Ok(())
    }

    /// Answers a [`Output::ServerRequest`].
    pub fn respond(
        &mut self,
        now: Instant,
        id: RequestId,
        response: Result<Box<RawValue>, ErrorObject>,
    ) -> Result<RespondStatus, CallError> {
        if matches!(self.phase, Phase::Closing | Phase::Closed) {
            return Err(self.closed_error());
        }
        // A request the server sent (the engine's) first: an id of ours for
        // a task's or a call's input never shadows one of the server's.
        if self.engine.has_server_request(&id) {
            let status = self.engine.respond(id, response)?;
            self.pump(now);
            return Ok(status);
        }
        let input = match self.tasks.respond(now, &mut self.out, &id, &response) {
            Some(status) => Some(status),
            None => self
                .era
                .modern_mut()
                .and_then(|m| m.respond(now, outbox!(self), &id, &response)),
        };
        if let Some(status) = input {
            if status == RespondStatus::Sent {
                self.pump(now);
            }
            return Ok(status);
        }
        let status = self.engine.respond(id, response)?;
        self.pump(now);
        Ok(status)
    }

    /// Cancels request `id`: it completes with [`RequestError::Cancelled`]
    /// and the server receives `notifications/cancelled`. Returns false if
    /// it had already completed.
    pub fn cancel(&mut self, now: Instant, id: u64, reason: &str) -> bool {
        if self.tasks.cancel(&mut self.out, id, reason) {
            self.pump(now);
            return true;
        }
        let done = match self
            .era
            .modern_mut()
            .and_then(|m| m.cancel(now, outbox!(self), id, reason))
        {
            Some(done) => done,
            None => self.engine.cancel(now, id, reason),
        };
        self.pump(now);
        done
    }

    /// Closes gracefully: pending requests complete with
    /// [`RequestError::Closed`], then the transport shuts down (stdio:
    /// close stdin, SIGTERM, SIGKILL; HTTP: DELETE the session). Ends with
    /// [`Output::Closed`].
    pub fn close(&mut self, now: Instant) {
        self.shut_down(now, CloseReason::Client);
        self.pump(now);
    }

    // ----- failures and the end -------------------------------------------

    pub(super) fn closed_error(&self) -> CallError {
        CallError::Closed(self.reason.as_ref().map_or_else(
            || "connection closed".to_string(),
            |r| r.message().to_string(),
        ))
    }

    pub(super) fn check_open(&self, method: Option<MethodId>) -> Result<(), CallError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Initializing { reinit: true, .. } => Ok(()),
            Phase::Initializing { .. } | Phase::Probing { .. }
                if method == Some(MethodId::Ping) =>
            {
                Ok(())
            }
            Phase::Initializing { .. } | Phase::Probing { .. } | Phase::Respawning => {
                Err(CallError::NotReady)
            }
            Phase::Closing | Phase::Closed => Err(self.closed_error()),
        }
    }
}
