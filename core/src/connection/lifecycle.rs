//! The connection's life: the era (probe, handshake, restart after the
//! probe), a renewed session, the fallback to legacy HTTP+SSE, a flow's
//! start, and the end.

use super::*;

impl Connection {
    // ----- the era and the handshake ---------------------------------------

    pub(super) fn start(&mut self, now: Instant) {
        if self.prober.handshake_first(&self.wire) {
            self.finding = Some(match self.prober.policy() {
                EraPolicy::Auto if !self.wire.is_legacy_sse() => EraFinding::Remembered,
                _ => EraFinding::Pinned,
            });
            self.start_handshake(now, false);
        } else {
            self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
        }
    }

    pub(super) fn start_probe(&mut self, now: Instant, version: &str, retried: bool) {
        let sent = self.prober.send(
            now,
            &mut self.engine,
            &mut self.wire,
            &self.client,
            version,
            retried,
        );
        match sent {
            Ok(id) => self.phase = Phase::Probing { id },
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("server/discover: {e}"))),
        }
    }

    /// The probe's answer decides the era.
    pub(super) fn on_probe(&mut self, now: Instant, outcome: Result<Box<RawValue>, RequestError>) {
        match self.prober.verdict(outcome) {
            None => {}
            Some(ProbeStep::Modern { version, server }) => {
                self.finding = Some(match self.prober.policy() {
                    EraPolicy::Modern => EraFinding::Pinned,
                    _ => EraFinding::Discovered,
                });
                let meta = probe::envelope(&self.client, &version);
                self.server = Some(*server);
                self.era = Spoken::Modern(Box::new(Modern::new(version, meta)));
                self.phase = Phase::Ready;
                self.ready_pending = true;
                self.open_listen(now);
            }
            Some(ProbeStep::Again(version)) => self.start_probe(now, &version, true),
            Some(ProbeStep::Handshake { silent: Some(ms) }) if self.wire.is_stdio() => {
                self.respawn(
                    now,
                    &format!("did not answer server/discover within {ms} ms"),
                );
            }
            Some(ProbeStep::Handshake { .. }) => {
                self.finding = Some(EraFinding::Refused);
                self.wire.end_era();
                self.start_handshake(now, false);
            }
            Some(ProbeStep::Close(reason)) => self.shut_down(now, reason),
        }
    }

    /// `subscriptions/listen` for the list changes the server announces.
    pub(super) fn open_listen(&mut self, now: Instant) {
        if let (Some(m), Some(server)) = (self.era.modern_mut(), &self.server) {
            m.open_listen(
                now,
                outbox!(self),
                &server.capabilities,
                self.listen_enabled,
            );
        }
    }

    pub(super) fn start_handshake(&mut self, now: Instant, reinit: bool) {
        let params = self.client.initialize_params();
        match self.engine.request(
            now,
            MethodId::Initialize.name(),
            Some(&params),
            RequestOptions::default(),
        ) {
            Ok(id) => {
                self.note_request(id, MethodId::Initialize.name(), None);
                self.phase = Phase::Initializing { id, reinit };
                self.initialize_id = Some(id);
            }
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("initialize: {e}"))),
        }
    }

    pub(super) fn on_initialize(
        &mut self,
        now: Instant,
        outcome: Result<Box<RawValue>, RequestError>,
        reinit: bool,
    ) {
        let mut initialize_error = None;
        let result = match outcome {
            Ok(raw) => accept_result(&raw),
            Err(e) => {
                let text = e.to_string();
                initialize_error = Some(e);
                Err(HandshakeError::Failed(text))
            }
        };
        match result {
            Ok(result) => {
                let version = result.protocol_version.clone();
                self.engine.set_accept_batches(version == "2025-03-26");
                self.server = Some(result);
                self.era = Spoken::Legacy;
                if let Err(e) = self.notify_engine(notifications::INITIALIZED, None) {
                    self.shut_down(now, CloseReason::Handshake(format!("initialized: {e}")));
                    return;
                }
                // Route the notification to the transport before telling it
                // the session is ready, so it goes out first.
                while let Some(o) = self.engine.poll_output() {
                    self.route_engine(now, o);
                }
                self.wire.initialized(now, &version);
                self.phase = Phase::Ready;
                if !reinit {
                    self.ready_pending = true;
                }
            }
            Err(e) => {
                if let (HandshakeError::Failed(_), Some(err)) = (&e, &initialize_error) {
                    // A server locked to 2026-07-28, or one remembered as
                    // legacy that no longer is, gets one probe.
                    if self.prober.probe_after(err, &self.wire) {
                        self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
                        return;
                    }
                }
                self.shut_down(now, CloseReason::Handshake(e.to_string()))
            }
        }
    }

    /// The server process is gone (the message says how). During the
    /// probe, or the handshake that followed it on the same process, a
    /// stdio server is started again once (the probe may be what ended
    /// it); otherwise the connection closes.
    pub(super) fn server_gone(&mut self, now: Instant, message: String) {
        let after_probe = match self.phase {
            Phase::Probing { .. } => true,
            Phase::Initializing { reinit: false, .. } => self.prober.probed(),
            _ => false,
        };
        if after_probe
            && !self.respawned
            && self.wire.is_stdio()
            && self.prober.policy() == EraPolicy::Auto
        {
            return self.respawn(now, &format!("ended when probed ({message})"));
        }
        self.shut_down(now, CloseReason::ServerGone(message))
    }

    /// Stops the stdio server and starts it again for the `initialize`
    /// handshake: the probe (or the `initialize` the old process took in)
    /// ends unseen, and nothing meant for the old process reaches the new
    /// one (the wire sends nothing until the new one is reported).
    pub(super) fn respawn(&mut self, now: Instant, why: &str) {
        self.respawned = true;
        self.finding = Some(EraFinding::Restarted(why.to_owned()));
        if let Some(id) = self.prober.abandon() {
            self.engine.fail(
                now,
                id,
                RequestError::Closed {
                    reason: "the server is started again".into(),
                },
            );
        }
        if let Some(id) = self.initialize_id {
            // Its completion is swallowed: the phase is no longer
            // Initializing when it arrives.
            self.engine.fail(
                now,
                id,
                RequestError::Closed {
                    reason: "the server is started again".into(),
                },
            );
        }
        self.phase = Phase::Respawning;
        // The spec's way with a server of the handshake era: a note.
        self.out
            .push_back(Output::Diagnostic(Diagnostic::Note(format!(
                "the server {why}: starting it again for the initialize handshake"
            ))));
        self.wire.restart(now, why);
    }

    /// The new process of [`Connection::respawn`] runs.
    pub(super) fn respawned(&mut self, now: Instant) {
        if self.phase == Phase::Respawning {
            self.wire.end_era();
            self.start_handshake(now, false);
        }
    }

    /// The server dropped our HTTP session: start over with a fresh
    /// `initialize` (the transport holds everything else meanwhile).
    pub(super) fn reinitialize(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Ready) {
            // Expired during the handshake itself: nothing to renew.
            self.shut_down(
                now,
                CloseReason::Transport("server ended the session during initialization".into()),
            );
            return;
        }
        self.wire.reset_session();
        self.start_handshake(now, true);
    }

    /// Streamable HTTP was refused: speak legacy HTTP+SSE to the same URL
    /// and re-send what was waiting (the `initialize` first).
    pub(super) fn fall_back(&mut self, now: Instant, resend: Vec<(Vec<u8>, SendKind)>) {
        let bearer = self.auth.as_ref().and_then(Auth::bearer);
        let config = with_bearer(&self.http_config, bearer);
        if self.wire.fall_back(now, config, resend) {
            self.out.push_back(Output::Diagnostic(Diagnostic::Transport(
                "server refused Streamable HTTP; falling back to legacy HTTP+SSE".into(),
            )));
        }
    }

    // ----- authorization ------------------------------------------------

    /// An exchange met 401/403: start a flow unless one runs.
    pub(super) fn on_auth_required(
        &mut self,
        now: Instant,
        status: u16,
        challenges: &[String],
        hints: &str,
        request: Option<u64>,
    ) {
        let Some(endpoint) = self.wire.auth_endpoint().cloned() else {
            return;
        };
        let Some(auth) = self.auth.as_mut() else {
            let message = format!("HTTP {status} and no authorization configured");
            return self.wire.authorization_failed(&message);
        };
        if let Some(id) = request {
            if self.engine.suspend_timeout(id) {
                auth.hold(id);
            }
        }
        if let Err(message) = auth.required(now, &endpoint, status, challenges, hints) {
            self.wire.authorization_failed(&message);
            self.resume_suspended(now);
        }
    }

    /// Restarts the clocks of the requests that waited for a flow.
    pub(super) fn resume_suspended(&mut self, now: Instant) {
        if let Some(auth) = self.auth.as_mut() {
            for id in auth.take_suspended() {
                self.engine.resume_timeout(now, id);
            }
        }
    }

    /// Ends the session: the engine completes everything pending with the
    /// reason, the transport shuts down; `Closed` follows when it is done.
    pub(super) fn shut_down(&mut self, now: Instant, reason: CloseReason) {
        if matches!(self.phase, Phase::Closing | Phase::Closed) {
            return;
        }
        if let Some(auth) = self.auth.as_mut() {
            auth.abandon("the connection is closing");
        }
        if let Some(m) = self.era.modern_mut() {
            m.close(&mut self.out, reason.message());
        }
        self.route_modern_ended(now);
        self.tasks.close(&mut self.out, reason.message());
        self.engine.close(reason.message());
        self.reason = Some(reason);
        self.phase = Phase::Closing;
        self.wire.begin_close(now);
    }

    pub(super) fn finish(&mut self) {
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        let reason = self.reason.clone().unwrap_or(CloseReason::Client);
        self.out.push_back(Output::Closed(reason));
    }
}
