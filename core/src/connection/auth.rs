//! The connection's authorization sub-state: the configured OAuth, the
//! state in use, the flow running (at most one) and the requests whose
//! clocks stopped while they wait for it.
//!
//! ```text
//!  transport: AuthRequired ─► required() ─ Ok: a flow runs (new or already) ─► poll_output …
//!                                        └ Err(message): the transport fails what it holds
//!  poll_output: Output (Http, AbortHttp, Authorize, LockTokens, UnlockTokens)
//!               │ Authorized(state) │ Adopted(state) │ Failed(message)
//!  a refresh:   LockTokens ─► stored_state(read under the lock) ─► newer and good: Adopted
//!                                                                └ else refresh ─► Authorized (saved, unlocked)
//! ```
//!
//! Authorization traffic has exchange ids of its own ([`AUTH_EXCHANGES`]
//! set): [`Auth::handle_input`] takes the inputs that report on it.

use std::time::Instant;

use super::types::{Input, Output};
use crate::auth::{
    parse_challenges, AuthAction, AuthConfig, AuthError, AuthFlow, AuthState, DpopBinding, Secrets,
    Trigger,
};
use crate::exchange::{ExchangeId, HttpUrl};

/// Exchange ids of authorization traffic carry this bit (the transports
/// number theirs from 0).
pub(super) const AUTH_EXCHANGES: u64 = 1 << 62;

/// Whether `exchange` is authorization traffic.
pub(super) fn is_auth_exchange(exchange: ExchangeId) -> bool {
    exchange.0 & AUTH_EXCHANGES != 0
}

/// What the authorization asks of the connection.
#[derive(Debug)]
pub(super) enum AuthStep {
    /// Emit this output (an exchange, an abort, the authorization URL).
    Output(Output),
    /// The flow succeeded (the state in use now): the transport sends
    /// what it holds again with the new bearer, the application stores the
    /// state, the waiting requests' clocks restart.
    Authorized(AuthState),
    /// The store had a newer state (another process refreshed): used as
    /// [`AuthStep::Authorized`], but there is nothing to save.
    Adopted(AuthState),
    /// The flow failed: the transport fails what it holds with this
    /// message, the waiting requests' clocks restart.
    Failed(String),
}

/// The connection's authorization bookkeeping.
pub(super) struct Auth {
    config: AuthConfig,
    /// The state in use (from the store or the last flow).
    state: Option<AuthState>,
    flow: Option<AuthFlow>,
    /// Flows in a row without a request succeeding in between.
    attempts: u32,
    next_exchange: u64,
    /// Requests whose clocks stopped while they wait for the flow.
    suspended: Vec<u64>,
    /// `HTTP 401 (WWW-Authenticate: …)` of the answer that started the
    /// flow, for the failure message.
    trigger: String,
}

impl Auth {
    pub(super) fn new(config: AuthConfig) -> Auth {
        Auth {
            state: config.state.clone(),
            config,
            flow: None,
            attempts: 0,
            next_exchange: AUTH_EXCHANGES,
            suspended: Vec::new(),
            trigger: String::new(),
        }
    }

    /// The state in use, if any.
    pub(super) fn state(&self) -> Option<&AuthState> {
        self.state.as_ref()
    }

    /// `Authorization` of the state in use, if any (`Bearer` or `DPoP`).
    pub(super) fn bearer(&self) -> Option<String> {
        self.state.as_ref().map(AuthState::authorization)
    }

    /// The DPoP binding of the state in use, if its token is bound.
    pub(super) fn dpop(&self) -> Option<DpopBinding> {
        self.state.as_ref()?.dpop_binding(self.config.wall_clock)
    }

    /// The DPoP binding of `state`, if its token is bound.
    pub(super) fn dpop_of(&self, state: &AuthState) -> Option<DpopBinding> {
        state.dpop_binding(self.config.wall_clock)
    }

    /// Request `id` waits for the authorization (the caller stopped its
    /// clock); its clock restarts when the flow ends.
    pub(super) fn hold(&mut self, id: u64) {
        self.suspended.push(id);
    }

    /// The requests to restart the clocks of (the flow ended).
    pub(super) fn take_suspended(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.suspended)
    }

    /// A request succeeded: the flows in a row start over.
    pub(super) fn succeeded(&mut self) {
        self.attempts = 0;
    }

    /// An exchange to `endpoint` met `status` (401/403) with these
    /// `WWW-Authenticate` values: starts a flow unless one runs. `Err`:
    /// none can start (too many in a row, no randomness), with the message
    /// the held requests fail with.
    pub(super) fn required(
        &mut self,
        now: Instant,
        endpoint: &HttpUrl,
        status: u16,
        challenges: &[String],
        hints: &str,
    ) -> Result<(), String> {
        if self.flow.is_some() {
            return Ok(());
        }
        if self.attempts >= self.config.max_attempts {
            let e = AuthError::TooManyAttempts(self.attempts);
            return Err(format!("HTTP {status}: {e}"));
        }
        self.attempts += 1;
        self.trigger = format!("HTTP {status}{hints}");
        let secrets = Secrets::generate().map_err(|e| e.to_string())?;
        let trigger = Trigger {
            status,
            challenges: parse_challenges(challenges.iter().map(String::as_str)),
        };
        self.flow = Some(AuthFlow::new(
            now,
            self.config.clone(),
            endpoint.clone(),
            trigger,
            self.state.clone(),
            secrets,
            ExchangeId(self.next_exchange),
        ));
        Ok(())
    }

    /// Feeds an input about authorization traffic to the flow; false when
    /// no flow runs (a finished flow's late input is dropped).
    pub(super) fn handle_input(&mut self, now: Instant, input: Input<'_>) -> bool {
        let Some(flow) = self.flow.as_mut() else {
            return false;
        };
        match input {
            Input::HttpHead { exchange, head } => flow.handle_head(now, exchange, head),
            Input::HttpBody { exchange, data } => flow.handle_body(now, exchange, data),
            Input::HttpEnd { exchange } => flow.handle_end(now, exchange),
            Input::HttpFailed { exchange, error } => flow.handle_failed(now, exchange, error),
            _ => {}
        }
        true
    }

    /// The state read from the token store under its lock, after
    /// `LockTokens`. False when no flow waits for it (the driver must
    /// release the lock).
    pub(super) fn handle_stored(&mut self, now: Instant, stored: Option<AuthState>) -> bool {
        match self.flow.as_mut().filter(|f| f.awaits_store()) {
            Some(flow) => {
                flow.handle_stored(now, stored);
                true
            }
            None => false,
        }
    }

    /// The user agent came back to `callback` after `Authorize`.
    pub(super) fn handle_redirect(&mut self, now: Instant, callback: &str) {
        if let Some(flow) = self.flow.as_mut() {
            flow.handle_redirect(now, callback);
        }
    }

    /// The application could not complete `Authorize`.
    pub(super) fn handle_redirect_error(&mut self, reason: &str) {
        if let Some(flow) = self.flow.as_mut() {
            flow.handle_redirect_error(reason);
        }
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if let Some(flow) = self.flow.as_mut() {
            flow.handle_timeout(now);
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.flow.as_ref().and_then(AuthFlow::poll_timeout)
    }

    /// The connection is closing: the flow ends.
    pub(super) fn abandon(&mut self, why: &str) {
        if let Some(flow) = self.flow.as_mut() {
            flow.abandon(why);
        }
    }

    /// What the flow asks next, if any.
    pub(super) fn poll_output(&mut self) -> Option<AuthStep> {
        let action = self.flow.as_mut()?.poll_output()?;
        Some(match action {
            AuthAction::Http(r) => AuthStep::Output(Output::Http(Box::new(r))),
            AuthAction::Abort(x) => AuthStep::Output(Output::AbortHttp(x)),
            AuthAction::Authorize { url } => AuthStep::Output(Output::Authorize { url }),
            AuthAction::LockStore { endpoint } => AuthStep::Output(Output::LockTokens { endpoint }),
            AuthAction::UnlockStore => AuthStep::Output(Output::UnlockTokens),
            AuthAction::Adopted(state) => {
                self.end_flow();
                self.state = Some(state.clone());
                AuthStep::Adopted(state)
            }
            AuthAction::Done(state) => {
                self.end_flow();
                self.state = Some(state.clone());
                AuthStep::Authorized(state)
            }
            AuthAction::Failed(e) => {
                self.end_flow();
                AuthStep::Failed(format!("{}; {e}", self.trigger))
            }
        })
    }

    /// The flow is over: the next one numbers its exchanges after its.
    fn end_flow(&mut self) {
        if let Some(flow) = self.flow.take() {
            self.next_exchange = flow.next_exchange().0;
        }
    }
}
