//! The target's requests (roots, sampling, elicitation) for a host of the
//! 2026-07-28 era, which cannot be sent requests: they reach it as input
//! rounds of its own request in flight (multi round-trip requests).
//!
//! ```text
//!  host tools/call id 1 ─► relayed ─► target asks sampling/createMessage
//!  host ◄─ id 1: {resultType: input_required, inputRequests: {r1: …}, requestState: S}
//!  host tools/call id 2 {…, inputResponses: {r1: …}, requestState: S}
//!       ─► the answer goes to the target; id 2 waits for the relayed call's end
//!  host ◄─ id 2: the result (or another input round)
//! ```
//!
//! The relayed call keeps running at the target across the rounds; only
//! the host's request id changes. This is for a target of the handshake
//! era: a 2026-07-28 target's input rounds go to the host as they are
//! (`relay_call`). A request of the target is put to the host's oldest
//! request waiting (then the oldest between rounds) that may take input rounds
//! (`tools/call`, `prompts/get`, `resources/read`); with none, the target
//! is answered with an error at once.

use std::collections::HashMap;

use mcpwire::mcp::methods::ServerRequestKind;
use mcpwire::modern::mrtr::input_rounds;
use mcpwire::rpc::{ErrorObject, RequestId, INVALID_PARAMS};
use mcpwire_tokio::CancelToken;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

/// How the target's request is answered.
pub(super) type Reply = oneshot::Sender<Result<Value, ErrorObject>>;
/// A relayed request's end.
pub(super) type Outcome = Result<Box<RawValue>, ErrorObject>;

/// Input requests put to the host in one round, at most.
const MAX_ROUND: usize = 16;
/// Relayed calls kept ended or waiting for a host that never retries.
const MAX_PARKED: usize = 64;

/// One relayed request of the host.
struct Round {
    /// The host's request now waiting for it (none between rounds).
    host: Option<RequestId>,
    /// Whether it may take input rounds.
    rounds: bool,
    /// The requests its envelope says the host answers (`roots`,
    /// `sampling`, `elicitation`).
    accepts: Vec<&'static str>,
    /// Its end, come while no host request waited.
    parked: Option<Outcome>,
    /// Put to the host, waiting for its `inputResponses`.
    sent: Vec<(String, Reply)>,
    /// Come while a round was out: for the next.
    queued: Vec<(String, &'static str, Value, Reply)>,
    /// The `requestState` that names it.
    state: String,
    next_key: u64,
    cancel: CancelToken,
}

/// Every relayed request of a 2026-07-28 host.
#[derive(Default)]
pub(super) struct Rounds {
    next: u64,
    open: HashMap<u64, Round>,
    /// Host request id → its relay.
    by_host: HashMap<RequestId, u64>,
    /// Relays with no host request waiting, oldest first.
    parked: Vec<u64>,
}

/// The prefix of the `requestState`s this bridge process gives: its own,
/// so that a bridge in front of another relays the inner one's rounds
/// instead of taking them for ended ones of its own.
fn state_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| format!("mcpwire-bridge-{:08x}-", nonce() as u32))
}

/// Retry params: the state and the answers (judged once the state is
/// known to be ours).
#[derive(Deserialize)]
struct Retry {
    #[serde(rename = "requestState")]
    state: Option<Value>,
    #[serde(rename = "inputResponses")]
    responses: Option<Value>,
}

impl Rounds {
    /// A new relay of the host's request `host` (`method`): its number.
    pub(super) fn start(
        &mut self,
        host: RequestId,
        method: &str,
        accepts: Vec<&'static str>,
        cancel: CancelToken,
    ) -> u64 {
        self.next += 1;
        let n = self.next;
        let state = format!("{}{n}-{:016x}", state_prefix(), nonce());
        self.by_host.insert(host.clone(), n);
        self.open.insert(
            n,
            Round {
                host: Some(host),
                rounds: input_rounds(method),
                accepts,
                parked: None,
                sent: Vec::new(),
                queued: Vec::new(),
                state,
                next_key: 0,
                cancel,
            },
        );
        n
    }

    /// Relay `n` ended: the host request to answer now, if one waits
    /// (else it is kept for the host's retry).
    pub(super) fn done(&mut self, n: u64, outcome: Outcome) -> Option<(RequestId, Outcome)> {
        let round = self.open.get_mut(&n)?;
        match round.host.take() {
            Some(host) => {
                self.by_host.remove(&host);
                self.open.remove(&n);
                Some((host, outcome))
            }
            None => {
                round.parked = Some(outcome);
                None
            }
        }
    }

    /// A request of the target for the host: put to the host's oldest
    /// request in flight that takes input rounds (the `input_required`
    /// answer to send now, if that request waits), or refused.
    pub(super) fn ask(
        &mut self,
        method: &'static str,
        params: Value,
        reply: Reply,
    ) -> Option<(RequestId, Outcome)> {
        let need = ServerRequestKind::of(method).and_then(super::capability_key);
        // The oldest whose host request waits now, before those between
        // rounds (whose host may never retry).
        let n = self
            .open
            .iter()
            .filter(|(_, r)| r.rounds && r.parked.is_none())
            .filter(|(_, r)| need.is_none_or(|k| r.accepts.contains(&k)))
            .map(|(n, r)| (r.host.is_none(), *n))
            .min()
            .map(|(_, n)| n);
        let Some(n) = n else {
            let _ = reply.send(Err(ErrorObject::new(
                -32603,
                format!(
                    "{method}: the host speaks 2026-07-28 and has no request in flight that \
                     declares it and may take input rounds"
                ),
            )));
            return None;
        };
        let round = self.open.get_mut(&n).expect("a candidate");
        round.next_key += 1;
        let key = format!("r{}", round.next_key);
        round.queued.push((key, method, params, reply));
        self.flush(n)
    }

    /// Puts relay `n`'s queued requests to its waiting host request, if
    /// one waits and no round is out.
    fn flush(&mut self, n: u64) -> Option<(RequestId, Outcome)> {
        let round = self.open.get_mut(&n)?;
        if round.queued.is_empty() || !round.sent.is_empty() || round.host.is_none() {
            return None;
        }
        let host = round.host.take().expect("waiting");
        self.by_host.remove(&host);
        self.parked.push(n);
        let take = round.queued.len().min(MAX_ROUND);
        let mut requests = Map::new();
        for (key, method, params, reply) in round.queued.drain(..take) {
            let mut request = json!({ "method": method });
            if !params.is_null() {
                request["params"] = params;
            }
            requests.insert(key.clone(), request);
            round.sent.push((key, reply));
        }
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": round.state,
        });
        let raw = serde_json::value::to_raw_value(&result).expect("JSON serializes");
        let out = Some((host, Ok(raw)));
        self.bound();
        out
    }

    /// The host's request `host` with `params`: `None` if it is no retry
    /// of ours (relay it), else what to answer now (`Some(None)`: it
    /// waits for the relayed call).
    pub(super) fn retry(
        &mut self,
        host: &RequestId,
        params: Option<&RawValue>,
    ) -> Option<Option<(RequestId, Outcome)>> {
        let p = params.filter(|p| p.get().contains(state_prefix()))?;
        let retry = serde_json::from_str::<Retry>(p.get()).ok()?;
        let state = match retry.state? {
            Value::String(s) if s.starts_with(state_prefix()) => s,
            // Not ours (a 2026-07-28 target's own round, another
            // bridge's): relayed.
            _ => return None,
        };
        let refuse = |why: &str| {
            Some(Some((
                host.clone(),
                Err(ErrorObject::new(INVALID_PARAMS, why)),
            )))
        };
        let mut responses = match retry.responses {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return refuse("inputResponses must be an object (request key to answer)"),
        };
        let Some((&n, _)) = self.open.iter().find(|(_, r)| r.state == state) else {
            return refuse("requestState: no such request (ended)");
        };
        let round = self.open.get_mut(&n).expect("found");
        if round.host.is_some() {
            return refuse("requestState: that request is waiting");
        }
        for (key, reply) in round.sent.drain(..) {
            let answer = responses.remove(&key).ok_or_else(|| {
                ErrorObject::new(-32603, format!("the host gave no answer for {key}"))
            });
            let _ = reply.send(answer);
        }
        round.host = Some(host.clone());
        self.by_host.insert(host.clone(), n);
        self.parked.retain(|p| *p != n);
        if let Some(outcome) = round.parked.take() {
            self.by_host.remove(host);
            self.open.remove(&n);
            return Some(Some((host.clone(), outcome)));
        }
        Some(self.flush(n))
    }

    /// The host request waiting for relay `n` now, if any.
    pub(super) fn waiting(&self, n: u64) -> Option<&RequestId> {
        self.open.get(&n)?.host.as_ref()
    }

    /// The host cancelled `host`: its relay is dropped (its requests to
    /// the host fail) and cancelled at the target. `false` if it was no
    /// relay of a 2026-07-28 request.
    pub(super) fn cancel(&mut self, host: &RequestId) -> bool {
        let Some(n) = self.by_host.remove(host) else {
            return false;
        };
        if let Some(round) = self.open.remove(&n) {
            round.cancel.cancel();
        }
        true
    }

    /// Drops the oldest relays no host request waits for, past
    /// [`MAX_PARKED`] (a host that never retries).
    fn bound(&mut self) {
        while self.parked.len() > MAX_PARKED {
            let n = self.parked.remove(0);
            if let Some(round) = self.open.remove(&n) {
                round.cancel.cancel();
            }
        }
    }

    /// The host is gone: every relay cancelled.
    pub(super) fn clear(&mut self) {
        for (_, round) in self.open.drain() {
            round.cancel.cancel();
        }
        self.by_host.clear();
        self.parked.clear();
    }
}

/// An unguessable-enough part of a `requestState` (the std hasher's random
/// keys): another host cannot name our relays.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(o: &Outcome) -> Value {
        serde_json::from_str(o.as_ref().unwrap().get()).unwrap()
    }

    #[tokio::test]
    async fn an_ask_becomes_an_input_round_and_the_retry_waits_for_the_end() {
        let mut r = Rounds::default();
        let host1 = RequestId::Number(1);
        let n = r.start(
            host1.clone(),
            "tools/call",
            vec!["sampling"],
            CancelToken::new(),
        );
        let (tx, rx) = oneshot::channel();
        let (to, round) = r
            .ask("sampling/createMessage", json!({"maxTokens": 5}), tx)
            .expect("the host waits");
        assert_eq!(to, host1);
        let round = value(&round);
        assert_eq!(round["resultType"], "input_required");
        assert_eq!(
            round["inputRequests"]["r1"]["method"],
            "sampling/createMessage"
        );
        let state = round["requestState"].as_str().unwrap().to_owned();
        // The retry answers the target and waits for the call.
        let host2 = RequestId::Number(2);
        let params = serde_json::value::to_raw_value(&json!({
            "name": "x", "requestState": state, "inputResponses": {"r1": {"content": "hi"}}
        }))
        .unwrap();
        assert!(matches!(r.retry(&host2, Some(&params)), Some(None)));
        assert_eq!(rx.await.unwrap().unwrap(), json!({"content": "hi"}));
        let end = serde_json::value::to_raw_value(&json!({"content": []})).unwrap();
        let (to, _) = r.done(n, Ok(end)).expect("answered");
        assert_eq!(to, host2);
        // Unknown state: an error; no relay left.
        assert!(matches!(
            r.retry(&RequestId::Number(3), Some(&params)),
            Some(Some((_, Err(_))))
        ));
        assert!(r.open.is_empty() && r.by_host.is_empty());
    }

    #[tokio::test]
    async fn with_no_request_to_ask_through_the_target_is_refused() {
        let mut r = Rounds::default();
        r.start(
            RequestId::Number(1),
            "tools/list",
            vec!["roots"],
            CancelToken::new(),
        );
        // A call whose host does not answer roots: not asked either.
        r.start(
            RequestId::Number(2),
            "tools/call",
            vec!["sampling"],
            CancelToken::new(),
        );
        let (tx, rx) = oneshot::channel();
        assert!(r.ask("roots/list", Value::Null, tx).is_none());
        assert!(rx.await.unwrap().is_err());
    }

    #[tokio::test]
    async fn an_end_while_no_request_waits_is_kept_for_the_retry() {
        let mut r = Rounds::default();
        let token = CancelToken::new();
        let n = r.start(
            RequestId::Number(1),
            "tools/call",
            vec!["roots"],
            token.clone(),
        );
        let (tx, _rx) = oneshot::channel();
        let round = value(&r.ask("roots/list", Value::Null, tx).unwrap().1);
        let state = round["requestState"].as_str().unwrap().to_owned();
        let end = serde_json::value::to_raw_value(&json!({"done": true})).unwrap();
        assert!(r.done(n, Ok(end)).is_none());
        let params =
            serde_json::value::to_raw_value(&json!({"requestState": state, "inputResponses": {}}))
                .unwrap();
        let (to, outcome) = r
            .retry(&RequestId::Number(2), Some(&params))
            .unwrap()
            .unwrap();
        assert_eq!(
            (to, value(&outcome)),
            (RequestId::Number(2), json!({"done": true}))
        );
        // Cancelling an unknown request is not ours.
        assert!(!r.cancel(&RequestId::Number(2)));
        assert!(!token.is_cancelled());
    }

    #[tokio::test]
    async fn a_retry_of_ours_whose_input_responses_are_no_object_is_refused() {
        let mut r = Rounds::default();
        let token = CancelToken::new();
        r.start(
            RequestId::Number(1),
            "tools/call",
            vec!["roots"],
            token.clone(),
        );
        let (tx, mut rx) = oneshot::channel();
        let round = value(&r.ask("roots/list", Value::Null, tx).unwrap().1);
        let state = round["requestState"].as_str().unwrap().to_owned();
        for responses in [json!(["r1"]), json!("r1"), json!(5)] {
            let params = serde_json::value::to_raw_value(
                &json!({"name": "x", "requestState": state, "inputResponses": responses}),
            )
            .unwrap();
            // Not relayed as a new call (None): refused.
            let Some(Some((to, Err(e)))) = r.retry(&RequestId::Number(2), Some(&params)) else {
                panic!("{responses}: not refused");
            };
            assert_eq!((to, e.code), (RequestId::Number(2), INVALID_PARAMS));
            assert!(e.message.contains("inputResponses"), "{}", e.message);
        }
        // The round is untouched: the target still waits, a good retry
        // still answers it.
        assert!(rx.try_recv().is_err() && !token.is_cancelled());
        let params = serde_json::value::to_raw_value(
            &json!({"requestState": state, "inputResponses": {"r1": {"roots": []}}}),
        )
        .unwrap();
        assert!(matches!(
            r.retry(&RequestId::Number(3), Some(&params)),
            Some(None)
        ));
        assert_eq!(rx.await.unwrap().unwrap(), json!({"roots": []}));
        // Someone else's state (a 2026-07-28 target's) is not ours to judge.
        for responses in [json!([]), json!({})] {
            let theirs = serde_json::value::to_raw_value(&json!({"requestState": "opaque",
                "inputResponses": responses, "arguments": {"note": "mcpwire-bridge-"}}))
            .unwrap();
            assert!(r.retry(&RequestId::Number(4), Some(&theirs)).is_none());
        }
        // Another bridge's state (a bridge in front of this one relays
        // the rounds of the one behind it): relayed, not refused as ended.
        let process = if state_prefix() == "mcpwire-bridge-00000000-" {
            "00000001"
        } else {
            "00000000"
        };
        let other = format!("mcpwire-bridge-{process}-1-0123456789abcdef");
        let params = serde_json::value::to_raw_value(
            &json!({"requestState": other, "inputResponses": {"r1": {}}}),
        )
        .unwrap();
        assert!(r.retry(&RequestId::Number(5), Some(&params)).is_none());
    }
}
