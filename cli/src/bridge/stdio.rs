//! The stdio bridge's loop: one task owns the host's [`ServerSession`];
//! the target's connect, the relayed calls and the target's notifications
//! and requests run in tasks of their own and report back as [`Cmd`]s.
//!
//! ```text
//!  stdin ──► ServerSession ──► ServerEvent ──► Stdio::event ──► tasks ──┐
//!  stdout ◄── ServerSession ◄── Stdio::command ◄── Cmd ◄────────────────┘
//! ```
//!
//! The target is connected in a task too ([`Cmd::Connected`]), so a slow
//! connect holds up nothing else: until it ends, what needs the target
//! (`initialize`, `server/discover`, requests, notifications to relay)
//! waits in order, and so do the target's own requests for the host; the
//! host's pings are answered, and a waiting request the host cancels is
//! dropped. A failed connect answers each waiting request with -32603
//! naming the target; the next request tries again.

use std::collections::VecDeque;

use super::*;

/// What the tasks of the bridge ask of the loop that owns the session.
pub(super) enum Cmd {
    /// Answer the host's request.
    Respond {
        id: RequestId,
        outcome: Result<Box<RawValue>, ErrorObject>,
    },
    /// A notification for the host.
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// A relayed request of a 2026-07-28 host ended.
    Done {
        relay: u64,
        outcome: Result<Box<RawValue>, ErrorObject>,
    },
    /// The target withdrew its request `id` to the host (its handler was
    /// dropped): the host is told.
    Withdraw { id: u64 },
    /// A request of the target for the host; its answer goes to `reply`.
    Ask {
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, ErrorObject>>,
    },
    /// The target's connect ended.
    Connected(Result<Client, String>),
}

/// Runs the bridge until the host closes stdin.
pub(crate) async fn bridge(cli: &Cli, target: Target, tools: Tools) -> Result<u8, Fail> {
    let (tx, mut rx) = mpsc::channel::<Cmd>(QUEUE);
    let mut bridge = Stdio {
        cli,
        target: &target,
        tools: Arc::new(tools),
        session: ServerSession::default(),
        tx,
        client: None,
        waiting: None,
        calls: HashMap::new(),
        asks: HashMap::new(),
        host_modern: false,
        listens: Listens::default(),
        rounds: Rounds::default(),
    };
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    let mut host_gone = false;
    loop {
        tokio::select! {
            read = stdin.read(&mut buf), if !host_gone => match read {
                Ok(0) | Err(_) => {
                    bridge.session.finish();
                    host_gone = true;
                }
                Ok(n) => bridge.session.feed(&buf[..n]),
            },
            Some(cmd) = rx.recv() => bridge.command(cmd),
            _ = tokio::signal::ctrl_c() => {
                if let Some(c) = bridge.client.take() {
                    let _ = c.close_timeout(Duration::from_secs(5)).await;
                }
                return Err(Fail { code: 130, message: "interrupted".into() });
            }
        }
        while let Some(event) = bridge.session.poll_event() {
            bridge.event(event);
        }
        while let Some(line) = bridge.session.poll_write() {
            if stdout.write_all(&line).await.is_err() {
                host_gone = true;
                break;
            }
        }
        let _ = stdout.flush().await;
        if host_gone {
            break;
        }
    }
    if let Some(c) = bridge.client {
        let _ = c.close_timeout(Duration::from_secs(5)).await;
    }
    Ok(0)
}

/// The loop's state.
struct Stdio<'a> {
    cli: &'a Cli,
    target: &'a Target,
    tools: Arc<Tools>,
    session: ServerSession,
    /// Where the tasks report.
    tx: mpsc::Sender<Cmd>,
    client: Option<Client>,
    /// While the target connects: what waits for it, in order.
    waiting: Option<Waiting>,
    /// The host's requests relayed and not answered: their cancel tokens.
    calls: HashMap<RequestId, CancelToken>,
    /// The target's requests sent to the host.
    asks: HashMap<u64, oneshot::Sender<Result<Value, ErrorObject>>>,
    /// A 2026-07-28 host: list changes reach it through its listens only.
    host_modern: bool,
    listens: Listens<RequestId>,
    rounds: Rounds,
}

/// What waits for the target's connect.
#[derive(Default)]
struct Waiting {
    /// The host's messages that need the target.
    events: VecDeque<ServerEvent>,
    /// The target's requests for the host ([`Cmd::Ask`]), put once the
    /// host's first requests are under way (a 2026-07-28 host's may be
    /// what they are put to).
    asks: Vec<Cmd>,
}

/// The request an event of the host is, if any.
fn request_id(event: &ServerEvent) -> Option<&RequestId> {
    match event {
        ServerEvent::Initialize { id, .. }
        | ServerEvent::Discover { id, .. }
        | ServerEvent::Request { id, .. } => Some(id),
        _ => None,
    }
}

impl Stdio<'_> {
    /// What a task reported.
    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Connected(connected) => self.connected(connected),
            Cmd::Ask { .. } if self.waiting.is_some() => {
                if let Some(w) = &mut self.waiting {
                    w.asks.push(cmd);
                }
            }
            Cmd::Respond { id, outcome } => {
                self.calls.remove(&id);
                // Cancelled by the host meanwhile: no answer is due.
                let _ = self.session.respond(id, outcome);
            }
            Cmd::Notify { method, params } if self.host_modern && through_listens(&method) => {
                for (_, params) in self.listens.route(&method, params.as_deref()) {
                    let _ = self.session.notify(&method, Some(&params));
                }
            }
            Cmd::Notify { method, params } => {
                let _ = self.session.notify(&method, params.as_deref());
            }
            Cmd::Withdraw { id } => {
                if self.asks.remove(&id).is_some() {
                    let _ = self
                        .session
                        .withdraw(id, Some("the server cancelled its request"));
                }
            }
            Cmd::Done { relay, outcome } => {
                if let Some((id, outcome)) = self.rounds.done(relay, outcome) {
                    let _ = self.session.respond(id, outcome);
                }
            }
            Cmd::Ask {
                method,
                params,
                reply,
            } if self.host_modern => {
                if let Some((id, round)) = self.rounds.ask(method, params, reply) {
                    let _ = self.session.respond(id, round);
                }
            }
            Cmd::Ask {
                method,
                params,
                reply,
            } => self.ask(method, params, reply),
        }
    }

    /// Puts the target's request to a host of the handshake era.
    fn ask(
        &mut self,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, ErrorObject>>,
    ) {
        // A request without params has none (not `null`).
        let params = match params {
            Value::Null => None,
            p => serde_json::value::to_raw_value(&p).ok(),
        };
        match self.session.request(method, params.as_deref()) {
            Ok(id) => {
                // The answer goes through a watcher: if the target
                // withdraws its request (the client drops the handler),
                // the host is told.
                let (answer, answered) = oneshot::channel();
                self.asks.insert(id, answer);
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let mut reply = reply;
                    tokio::select! {
                        a = answered => {
                            if let Ok(a) = a {
                                let _ = reply.send(a);
                            }
                        }
                        () = reply.closed() => {
                            let _ = tx.send(Cmd::Withdraw { id }).await;
                        }
                    }
                });
            }
            Err(e) => {
                let _ = reply.send(Err(ErrorObject::internal(format!(
                    "{method} not sent to the host: {e}"
                ))));
            }
        }
    }

    /// Connects the target for the host (`params` as `initialize`'s) in a
    /// task; `first`, which needs it, waits for it.
    fn connect(&mut self, params: &Value, first: ServerEvent) {
        let tx = self.tx.clone();
        let connecting = connect(self.cli, self.target, params, |k| ask_host(k, tx.clone()));
        tokio::spawn(async move {
            let connected = connecting.await;
            let _ = tx.send(Cmd::Connected(connected)).await;
        });
        let mut waiting = Waiting::default();
        waiting.events.push_back(first);
        self.waiting = Some(waiting);
    }

    /// The connect ended: what waited goes on with the target, or is
    /// answered with the failure.
    fn connected(&mut self, connected: Result<Client, String>) {
        let Some(waiting) = self.waiting.take() else {
            return;
        };
        match connected {
            Ok(c) => {
                forward_notifications(&c, &self.tx);
                self.client = Some(c);
                for event in waiting.events {
                    self.event(event);
                }
            }
            Err(message) => {
                tracing::error!("{message}");
                let error = ErrorObject::internal(message);
                for event in waiting.events {
                    if let Some(id) = request_id(&event) {
                        let _ = self.session.respond(id.clone(), Err(error.clone()));
                    }
                }
            }
        }
        for ask in waiting.asks {
            self.command(ask);
        }
    }

    /// What the host did.
    fn event(&mut self, event: ServerEvent) {
        if let Some(waiting) = &mut self.waiting {
            match &event {
                ServerEvent::Cancelled { id, .. } => {
                    let queued = waiting
                        .events
                        .iter()
                        .position(|e| request_id(e) == Some(id));
                    if let Some(i) = queued {
                        // Never relayed: nothing to tell the target.
                        waiting.events.remove(i);
                        return;
                    }
                }
                ServerEvent::Initialize { .. }
                | ServerEvent::Discover { .. }
                | ServerEvent::Request { .. }
                | ServerEvent::Notification { .. } => {
                    waiting.events.push_back(event);
                    return;
                }
                _ => {}
            }
        }
        match event {
            ServerEvent::Initialize { id, params } => {
                let Some(c) = self.client.clone() else {
                    let host = params.clone();
                    return self.connect(&host, ServerEvent::Initialize { id, params });
                };
                if let Err(e) = self.session.accept(&id, init_result(&c, Era::Legacy)) {
                    tracing::warn!("initialize not answered: {e}");
                }
            }
            ServerEvent::Discover {
                id,
                client_capabilities,
            } => {
                self.host_modern = true;
                let Some(c) = self.client.clone() else {
                    let params = modern_host(&client_capabilities, None, true);
                    let event = ServerEvent::Discover {
                        id,
                        client_capabilities,
                    };
                    return self.connect(&params, event);
                };
                if let Err(e) = self.session.discover(&id, init_result(&c, Era::Modern)) {
                    tracing::warn!("server/discover not answered: {e}");
                }
            }
            ServerEvent::Initialized => {}
            ServerEvent::Request {
                id,
                method,
                params,
                era,
            } => match (self.client.clone(), era) {
                (Some(c), _) => self.request(c, id, method, params, era),
                (None, Era::Modern) => {
                    let host = modern_host_of(params.as_deref(), true);
                    let event = ServerEvent::Request {
                        id,
                        method,
                        params,
                        era,
                    };
                    self.connect(&host, event);
                }
                (None, Era::Legacy) => {
                    let error = ErrorObject::internal("the target is not connected");
                    let _ = self.session.respond(id, Err(error));
                }
            },
            ServerEvent::Cancelled { id, reason } => {
                if let (Some(gone), Some(c)) = (self.listens.close(&id), self.client.clone()) {
                    tokio::spawn(async move {
                        for uri in gone {
                            let _ = c.unsubscribe(&uri).await;
                        }
                    });
                }
                if self.rounds.cancel(&id) {
                    tracing::debug!("the host cancelled {id}: {reason:?}");
                }
                if let Some(token) = self.calls.remove(&id) {
                    tracing::debug!("the host cancelled {id}: {reason:?}");
                    token.cancel();
                }
            }
            ServerEvent::Notification { method, params } => {
                if method == notifications::PROGRESS {
                    // Of the host's answer to a request of the target's:
                    // the target gave no token to relay it.
                    return;
                }
                if let Some(c) = self.client.clone() {
                    tokio::spawn(async move {
                        if let Err(e) = c.notify_raw(&method, params).await {
                            tracing::debug!("{method} not relayed: {e}");
                        }
                    });
                }
            }
            ServerEvent::Response { id, outcome } => {
                if let Some(reply) = self.asks.remove(&id) {
                    let answer = outcome.and_then(|raw| {
                        serde_json::from_str(raw.get()).map_err(|e| {
                            ErrorObject::internal(format!("the host's answer is not JSON: {e}"))
                        })
                    });
                    let _ = reply.send(answer);
                }
            }
            ServerEvent::Closed { .. } => {
                // Dropping the senders fails the target's requests.
                self.asks.clear();
                self.rounds.clear();
                self.waiting = None;
                for (_, token) in self.calls.drain() {
                    token.cancel();
                }
            }
            ServerEvent::Diagnostic(d) => tracing::debug!("host: {d}"),
        }
    }

    /// A request of the host, the target connected.
    fn request(
        &mut self,
        c: Client,
        id: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
        era: Era,
    ) {
        self.host_modern |= era == Era::Modern;
        if era == Era::Modern && method == MethodId::SubscriptionsListen.name() {
            let filter = Filter::of(params.as_deref());
            for uri in filter.uris.iter().filter(|u| !self.listens.subscribed(u)) {
                let (c, uri) = (c.clone(), uri.clone());
                tokio::spawn(async move {
                    if let Err(e) = c.subscribe(&uri).await {
                        tracing::warn!("subscribing to {uri}: {e}");
                    }
                });
            }
            let (ack_method, ack_params) = ack(&id);
            self.listens.open(id.clone(), id, filter);
            let _ = self.session.notify(ack_method, Some(&ack_params));
            return;
        }
        if era == Era::Modern {
            // The retry of an input round: the relayed call goes on; this
            // request waits for it.
            if let Some(now) = self.rounds.retry(&id, params.as_deref()) {
                if let Some((id, outcome)) = now {
                    let _ = self.session.respond(id, outcome);
                }
                return;
            }
        }
        if let Some(refusal) = refuse(&self.tools, &method, params.as_deref()) {
            let _ = self.session.respond(id, Err(refusal));
            return;
        }
        let token = CancelToken::new();
        let relay = match era {
            Era::Modern => {
                let accepts = accepts(params.as_deref());
                Some(
                    self.rounds
                        .start(id.clone(), &method, accepts, token.clone()),
                )
            }
            Era::Legacy => {
                self.calls.insert(id.clone(), token.clone());
                None
            }
        };
        let call = Relay {
            client: c,
            tools: self.tools.clone(),
            token,
            timeout: timeout(self.cli),
            host: era,
        };
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let progress = {
                let tx = tx.clone();
                move |params| {
                    // Progress is advice: under pressure one may be dropped.
                    let _ = tx.try_send(Cmd::Notify {
                        method: notifications::PROGRESS.into(),
                        params: Some(params),
                    });
                }
            };
            let outcome = relay_call(call, &method, params, progress).await;
            let done = match relay {
                Some(relay) => Cmd::Done { relay, outcome },
                None => Cmd::Respond { id, outcome },
            };
            let _ = tx.send(done).await;
        });
    }
}

/// A handler that asks the host, as the target asked the bridge.
fn ask_host(kind: ServerRequestKind, tx: mpsc::Sender<Cmd>) -> Handler {
    Handler::Async(Arc::new(move |params: Value| {
        let tx = tx.clone();
        Box::pin(async move {
            let gone = || ErrorObject::internal("the host is gone");
            let (reply, answer) = oneshot::channel();
            let method = kind.method();
            tx.send(Cmd::Ask {
                method,
                params,
                reply,
            })
            .await
            .map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }))
}

/// The target's notifications, sent on to the host.
fn forward_notifications(client: &Client, tx: &mpsc::Sender<Cmd>) {
    let mut notes = client.notifications();
    let tx = tx.clone();
    tokio::spawn(async move {
        while let Some(n) = notes.recv().await {
            let cmd = Cmd::Notify {
                method: n.method().to_owned(),
                params: n.params(),
            };
            if tx.send(cmd).await.is_err() {
                break;
            }
        }
    });
}
