//! Authorization of the Streamable HTTP transport: the bearer and its
//! origin, DPoP proofs, and what an authorization under way holds back.

use std::time::Instant;

use super::{is_header_value, ListenState, Outgoing, Phase, StreamableHttp, Waiting};
use crate::exchange::dpop::{DpopBinding, ProofRequest};
use crate::rpc::SendKind;
use crate::transport::{HttpMethod, RequestFailure};

impl StreamableHttp {
    /// Makes 401 (and 403 `insufficient_scope`) answers hold their message
    /// and report [`HttpEvent::AuthRequired`] instead of failing it.
    ///
    /// [`HttpEvent::AuthRequired`]: super::HttpEvent::AuthRequired
    pub fn enable_auth(&mut self) {
        self.auth_enabled = true;
    }

    /// Sets the `Authorization` header of every later request (`None`:
    /// none). It replaces a configured `Authorization` header.
    /// The bearer is bound to the current endpoint's origin.
    pub fn set_authorization(&mut self, value: Option<String>) {
        self.authorization = value.filter(|v| is_header_value(v));
        self.auth_origin = self.url.clone();
    }

    /// Binds the access token of the `Authorization` to a DPoP key: every
    /// later request to its origin carries a fresh proof (`None`: none).
    pub fn set_dpop(&mut self, binding: Option<DpopBinding>) {
        self.dpop = binding;
    }

    /// Notes the time of a call (proofs are dated from it).
    pub(super) fn touch(&mut self, now: Instant) {
        self.clock = Some(now);
    }

    /// The `DPoP` header for a request to the endpoint, when the token is
    /// bound and the request goes where the token goes.
    pub(super) fn dpop_proof(&self, method: HttpMethod) -> Option<(String, String)> {
        let d = self.dpop.as_ref()?;
        let now = self.clock?;
        if !self.url.same_origin(&self.auth_origin) || self.authorization.is_none() {
            return None;
        }
        let request = ProofRequest {
            method: method.as_str(),
            url: &self.url,
            access_token: Some(&d.access_token),
        };
        match d.key.proof(request, d.clock.unix_secs(now)) {
            Ok(p) => Some(("DPoP".to_owned(), p)),
            Err(_) => None,
        }
    }

    /// Whether an authorization is under way (sends are being parked).
    pub fn auth_pending(&self) -> bool {
        self.auth_hold
    }

    /// The authorization succeeded: sends every parked message again, in
    /// order, with `authorization` (and reopens the listener if it met the
    /// 401).
    pub fn authorized(&mut self, now: Instant, authorization: String) {
        self.touch(now);
        self.set_authorization(Some(authorization));
        self.auth_hold = false;
        if self
            .confirming
            .as_ref()
            .is_some_and(|c| c.exchange.is_none())
        {
            self.post_confirming();
        }
        for out in std::mem::take(&mut self.parked) {
            match (self.phase, &out.kind) {
                (Phase::Initializing { id: init, .. }, SendKind::Request { id }) if *id == init => {
                    self.post(out, false);
                }
                _ => self.submit(now, out),
            }
        }
        if std::mem::take(&mut self.listener_wants_auth)
            && self.phase == Phase::Ready
            && self.confirming.is_none()
            && self.config.listen
            && self.listener.state == ListenState::Off
        {
            self.open_listener();
        }
    }

    /// The authorization failed: every parked request fails with
    /// `message`; parked notifications and responses are dropped. If
    /// `notifications/initialized` was waiting for it, the session cannot
    /// start: [`HttpEvent::Fatal`].
    ///
    /// [`HttpEvent::Fatal`]: super::HttpEvent::Fatal
    pub fn authorization_failed(&mut self, message: &str) {
        self.auth_hold = false;
        self.listener_wants_auth = false;
        if self
            .confirming
            .as_ref()
            .is_some_and(|c| c.exchange.is_none())
        {
            return self.fatal(format!(
                "notifications/initialized was not sent (no authorization): {message}"
            ));
        }
        for out in std::mem::take(&mut self.parked) {
            match out.kind {
                SendKind::Request { id } => self.fail(id, RequestFailure::Auth(message.to_owned())),
                _ => self.diag(format!("message dropped: {message}")),
            }
        }
    }

    pub(super) fn park(&mut self, out: Outgoing) {
        self.enqueue(Waiting::Authorization, out);
    }
}
