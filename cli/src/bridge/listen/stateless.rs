//! `--listen`'s 2026-07-28 side: requests without a session, relayed to
//! the one target session they share (connected by the first).
//!
//! ```text
//!  POST server/discover        ─► the target's identity, in that era's shape
//!  POST subscriptions/listen   ─► an SSE stream: acknowledged, then the
//!                                 list changes its filter asks for
//!  POST tools/call …           ─► relayed; answered JSON, or an SSE stream
//!                                 once a progress notification comes first;
//!                                 the target's requests come back as input
//!                                 rounds (`input_required`), the retry's
//!                                 answers go to the target
//! ```
//!
//! Each request is relayed under an id of the bridge's (clients' ids may
//! collide). A request is cancelled when its client closes the POST's
//! response, JSON or SSE, before the answer: that era's cancellation over
//! Streamable HTTP ("closing the SSE response stream is the cancellation
//! signal … no `notifications/cancelled` is required or expected"). A
//! `notifications/cancelled` POST is ignored: it names a request by its
//! client's id alone, which another client may use too, and these
//! requests share one target session (a listen ends the same way, its
//! stream closed). A target's request is put to the oldest request in flight
//! that may take input rounds (see `rounds`): with several clients at once
//! it may reach another client than the one whose call caused it, as all
//! of them share the target session that era gives them.

use std::sync::Weak;

use super::*;

/// What a relayed request's POST waits for.
pub(super) enum Ev {
    /// A progress notification's params.
    Progress(Box<RawValue>),
    /// Its answer: the result (or an input round), or the error.
    Done(Result<Box<RawValue>, ErrorObject>),
}

/// A 2026-07-28 request: relayed to the target session such requests
/// share (connected by the first, with its envelope's capabilities);
/// `server/discover` answered from the target's identity.
pub(super) async fn stateless(
    server: &Arc<Server>,
    id: RequestId,
    method: &str,
    params: Option<&RawValue>,
    wants_sse: bool,
) -> Response<Body> {
    let session = {
        let mut slot = server.stateless.lock().await;
        match &*slot {
            Some(s) => s.clone(),
            None => {
                let host = modern_host_of(params, true);
                let weak: Arc<Mutex<Weak<Session>>> = Arc::new(Mutex::new(Weak::new()));
                let ask = {
                    let weak = weak.clone();
                    move |kind: ServerRequestKind| ask_stateless(kind, weak.clone())
                };
                match connect(&server.cli, &server.target, &host, ask).await {
                    Ok(client) => {
                        let session = Arc::new(Session {
                            client: client.clone(),
                            state: Mutex::new(State::default()),
                        });
                        *weak.lock().expect("lock") = Arc::downgrade(&session);
                        forward_notifications(&client, &session, true);
                        *slot = Some(session.clone());
                        session
                    }
                    Err(message) => {
                        tracing::error!("{message}");
                        let error = ErrorObject::internal(message);
                        return json_response(&json!({"jsonrpc":"2.0","id":id,"error":error}));
                    }
                }
            }
        }
    };
    if method == MethodId::SubscriptionsListen.name() {
        return listen_stream(&session, id, params);
    }
    if method == MethodId::Discover.name() {
        return json_response(&response(
            &id,
            discover_result(init_result(&session.client, Era::Modern))
                .map_err(|e| ErrorObject::internal(e.to_string())),
        ));
    }
    if let Some(refusal) = refuse(&server.tools, method, params) {
        return json_response(&response(&id, Err(refusal)));
    }
    let (tx, mut rx) = mpsc::channel::<Ev>(STREAM_QUEUE);
    let ours = {
        let mut state = session.state.lock().expect("lock");
        state.next_internal += 1;
        let ours = RequestId::String(format!("stateless-{}", state.next_internal));
        state.waiters.insert(ours.clone(), tx);
        match state.rounds.retry(&ours, params) {
            // The retry of an input round: the relayed call goes on.
            Some(now) => {
                if let Some((to, outcome)) = now {
                    deliver(&mut state, &to, Ev::Done(outcome));
                }
            }
            None => {
                let token = CancelToken::new();
                let accepts = accepts(params);
                let n = state
                    .rounds
                    .start(ours.clone(), method, accepts, token.clone());
                drop(state);
                spawn_relay(server, &session, n, method, params, token);
            }
        }
        ours
    };
    // Dropped with this future if the client goes away before its answer.
    let waiting = Waiting {
        session: session.clone(),
        ours: ours.clone(),
        answered: false,
    };
    let method_id = MethodId::of(method);
    let finish = move |outcome: Result<Box<RawValue>, ErrorObject>| {
        outcome.map(|raw| modern_result(raw, method_id))
    };
    // The answer: JSON unless a progress notification comes first (then
    // an SSE stream: that era has no resumption, so no event ids).
    let first = rx.recv().await;
    match first {
        Some(Ev::Done(outcome)) => {
            waiting.answered();
            json_answer(&id, finish(outcome))
        }
        Some(Ev::Progress(p)) if wants_sse => {
            let (out, body) = mpsc::channel::<Bytes>(STREAM_QUEUE);
            let progress = |p: Box<RawValue>| {
                let note = notification_message(notifications::PROGRESS, Some(&p));
                Bytes::from(format!("event: message\ndata: {note}\n\n"))
            };
            let _ = out.try_send(progress(p));
            tokio::spawn(async move {
                loop {
                    // A client that closes the stream cancels the call at
                    // once, not at the next event.
                    let ev = tokio::select! {
                        ev = rx.recv() => ev,
                        () = out.closed() => return,
                    };
                    let Some(ev) = ev else { break };
                    let bytes = match ev {
                        Ev::Progress(p) => progress(p),
                        Ev::Done(outcome) => {
                            let message = response(&id, finish(outcome));
                            let _ = out
                                .send(Bytes::from(format!("event: message\ndata: {message}\n\n")))
                                .await;
                            break;
                        }
                    };
                    if out.send(bytes).await.is_err() {
                        // The client went away: its call is cancelled
                        // (`waiting`'s drop).
                        return;
                    }
                }
                waiting.answered();
            });
            sse(body)
        }
        Some(Ev::Progress(_)) => {
            // A client that takes JSON only: progress is dropped.
            loop {
                match rx.recv().await {
                    Some(Ev::Progress(_)) => continue,
                    Some(Ev::Done(outcome)) => {
                        waiting.answered();
                        return json_answer(&id, finish(outcome));
                    }
                    None => break,
                }
            }
            waiting.answered();
            let error = ErrorObject::internal("the relayed request was dropped");
            json_response(&response(&id, Err(error)))
        }
        None => {
            waiting.answered();
            let error = ErrorObject::internal("the relayed request was dropped");
            json_response(&response(&id, Err(error)))
        }
    }
}

/// The POST of a client's request (`ours`: the bridge's id for it),
/// waiting for its answer. Dropped, nothing waits any more; dropped before
/// it is answered (the client went away, and the POST's future or stream
/// with it), its relay is cancelled at the target.
struct Waiting {
    session: Arc<Session>,
    ours: RequestId,
    answered: bool,
}

impl Waiting {
    /// Answered (an input round included: the relay goes on for the
    /// retry).
    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut state = self.session.state.lock().expect("lock");
        state.waiters.remove(&self.ours);
        if !self.answered {
            state.rounds.cancel(&self.ours);
        }
    }
}

/// Sends `ev` to the POST waiting as `to` (its answer ends the wait).
fn deliver(state: &mut State, to: &RequestId, ev: Ev) {
    let Some(tx) = state.waiters.get(to) else {
        return;
    };
    if let Ev::Progress(_) = ev {
        // Progress is advice: dropped when the POST is behind.
        let _ = tx.try_send(ev);
        return;
    }
    // The answer must not be lost to a queue full of progress.
    let tx = tx.clone();
    state.waiters.remove(to);
    tokio::spawn(async move {
        let _ = tx.send(ev).await;
    });
}

/// A 2026-07-28 answer as JSON, with the HTTP status its error calls for
/// (`server::error_status`: 400, 404, else 200).
fn json_answer(id: &RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> Response<Body> {
    let status = match &outcome {
        Err(e) => StatusCode::from_u16(error_status(e.code)).unwrap_or(StatusCode::OK),
        Ok(_) => StatusCode::OK,
    };
    let body = response(id, outcome);
    if status != StatusCode::OK {
        return full(status, "application/json", body.to_string());
    }
    json_response(&body)
}

/// Relays request `n` (`method`, `params`) to the target; its progress and
/// its end go to whichever POST waits for it then.
fn spawn_relay(
    server: &Arc<Server>,
    session: &Arc<Session>,
    n: u64,
    method: &str,
    params: Option<&RawValue>,
    token: CancelToken,
) {
    let call = server.relay(session, token, Era::Modern);
    let (method, params) = (method.to_owned(), params.map(RawValue::to_owned));
    let weak = Arc::downgrade(session);
    tokio::spawn(async move {
        let progress = {
            let weak = weak.clone();
            move |p: Box<RawValue>| {
                let Some(session) = weak.upgrade() else {
                    return;
                };
                let mut state = session.state.lock().expect("lock");
                if let Some(to) = state.rounds.waiting(n).cloned() {
                    deliver(&mut state, &to, Ev::Progress(p));
                }
            }
        };
        let outcome = relay_call(call, &method, params, progress).await;
        let Some(session) = weak.upgrade() else {
            return;
        };
        let mut state = session.state.lock().expect("lock");
        if let Some((to, outcome)) = state.rounds.done(n, outcome) {
            deliver(&mut state, &to, Ev::Done(outcome));
        }
    });
}

/// A handler that puts the target's request to a 2026-07-28 client as an
/// input round of a request in flight.
fn ask_stateless(kind: ServerRequestKind, session: Arc<Mutex<Weak<Session>>>) -> Handler {
    Handler::Async(Arc::new(move |params: Value| {
        let session = session.lock().expect("lock").upgrade();
        Box::pin(async move {
            let Some(session) = session else {
                return Err(ErrorObject::internal("the bridge's session is gone"));
            };
            let (reply, answer) = oneshot::channel();
            {
                let mut state = session.state.lock().expect("lock");
                if let Some((to, round)) = state.rounds.ask(kind.method(), params, reply) {
                    deliver(&mut state, &to, Ev::Done(round));
                }
            }
            answer
                .await
                .map_err(|_| ErrorObject::internal("the client is gone"))?
        })
    }))
}

/// A 2026-07-28 client's `subscriptions/listen`: an SSE stream,
/// acknowledged at once, then the list changes and resource updates its
/// filter asks for, until the client closes it.
fn listen_stream(
    session: &Arc<Session>,
    id: RequestId,
    params: Option<&RawValue>,
) -> Response<Body> {
    let filter = Filter::of(params);
    let (tx, rx) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    let stream = {
        let mut state = session.state.lock().expect("lock");
        for uri in filter.uris.iter().filter(|u| !state.listens.subscribed(u)) {
            let (c, uri) = (session.client.clone(), uri.clone());
            tokio::spawn(async move {
                if let Err(e) = c.subscribe(&uri).await {
                    tracing::warn!("subscribing to {uri}: {e}");
                }
            });
        }
        state.next_post += 1;
        let stream = StreamKey::Post(state.next_post);
        state.sinks.insert(stream, tx);
        state.listens.open(stream, id.clone(), filter);
        stream
    };
    let (method, params) = ack(&id);
    let note = notification_message(method, Some(&params));
    session.push_to(stream, &format!("data: {note}\n\n"), false);
    let (response, dropped) = sse_watched(rx);
    let weak = Arc::downgrade(session);
    tokio::spawn(async move {
        // The client closed the stream (that era's way to end a listen),
        // or it ended: the listen is closed.
        let _ = dropped.await;
        if let Some(session) = weak.upgrade() {
            close_listen(&session, stream);
        }
    });
    response
}

/// Closes the listen answered on `stream`; the URIs no other listen wants
/// are unsubscribed from at the target.
fn close_listen(session: &Arc<Session>, stream: StreamKey) {
    let gone = {
        let mut state = session.state.lock().expect("lock");
        state.sinks.remove(&stream);
        state.listens.close(&stream).unwrap_or_default()
    };
    if gone.is_empty() {
        return;
    }
    let client = session.client.clone();
    tokio::spawn(async move {
        for uri in gone {
            if let Err(e) = client.unsubscribe(&uri).await {
                tracing::debug!("unsubscribing from {uri}: {e}");
            }
        }
    });
}
