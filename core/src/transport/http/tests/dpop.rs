//! DPoP-bound tokens (RFC 9449) on the transport's requests.

use super::*;

// ---- DPoP (RFC 9449) -------------------------------------------------------

fn proof_claims(r: &HttpRequest) -> serde_json::Value {
    use base64::Engine as _;
    let proof = r.header("DPoP").expect("a DPoP proof");
    let part = proof.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A transport whose token is DPoP-bound.
fn dpop_harness() -> (Harness, crate::exchange::dpop::DpopKey) {
    use crate::exchange::dpop::{DpopKey, WallClock};
    let mut h = Harness::new();
    h.t.enable_auth();
    let key = DpopKey::generate().unwrap();
    h.t.set_authorization(Some("DPoP tok".into()));
    h.t.set_dpop(Some(DpopBinding {
        key: key.clone(),
        clock: WallClock::anchor(
            h.now,
            std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ),
        access_token: "tok".into(),
    }));
    (h, key)
}

#[test]
fn dpop_bound_token_sends_a_fresh_proof_on_every_request() {
    let (mut h, _key) = dpop_harness();
    h.advance(ms(2000));
    let sent = h.initialize(0, Some("sess-1"));
    let mut jtis = Vec::new();
    for r in &sent {
        assert_eq!(r.header("Authorization"), Some("DPoP tok"));
        let c = proof_claims(r);
        assert_eq!(c["htm"], r.method.as_str());
        assert_eq!(c["htu"], URL);
        assert_eq!(c["iat"], 1_700_000_002u64, "dated from the calls' now");
        assert_eq!(
            c["ath"],
            crate::auth::pkce_challenge("tok"),
            "ath = base64url(SHA-256(token))"
        );
        jtis.push(c["jti"].as_str().unwrap().to_owned());
    }
    jtis.dedup();
    assert_eq!(jtis.len(), sent.len(), "no proof is reused");
}

#[test]
fn dpop_nonce_from_the_resource_is_retried_once_then_authorization_runs() {
    let (mut h, key) = dpop_harness();
    h.request(0, "initialize");
    let first = h.one();
    assert!(proof_claims(&first).get("nonce").is_none());
    let challenge = [
        ("WWW-Authenticate", r#"DPoP error="use_dpop_nonce""#),
        ("DPoP-Nonce", "rs-1"),
    ];
    h.head(first.exchange, 401, &challenge);
    let events = actions(h.events());
    let [HttpEvent::Abort(a), HttpEvent::Request(again)] = &events[..] else {
        panic!("expected the request again, got {events:?}");
    };
    assert_eq!(*a, first.exchange);
    assert_eq!(again.body, first.body);
    assert_eq!(proof_claims(again)["nonce"], "rs-1");
    assert_eq!(
        key.nonce_for(&HttpUrl::parse(URL).unwrap()).as_deref(),
        Some("rs-1")
    );
    // The same challenge to a proof that carried the nonce: no loop, the
    // authorization takes over.
    h.head(again.exchange, 401, &challenge);
    assert!(h.events().iter().any(|e| matches!(
        e,
        HttpEvent::AuthRequired {
            request: Some(0),
            ..
        }
    )));
}

#[test]
fn dpop_nonce_without_a_binding_or_a_challenge_changes_nothing() {
    // Bearer token: a DPoP-Nonce means nothing.
    let mut h = Harness::new();
    h.t.enable_auth();
    h.t.set_authorization(Some("Bearer t".into()));
    h.request(0, "initialize");
    let first = h.one();
    assert_eq!(first.header("DPoP"), None);
    h.head(
        first.exchange,
        401,
        &[
            ("WWW-Authenticate", r#"DPoP error="use_dpop_nonce""#),
            ("DPoP-Nonce", "n"),
        ],
    );
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, HttpEvent::AuthRequired { .. })));
    // Bound, a nonce on a plain 401 (not use_dpop_nonce): remembered, no
    // retry.
    let (mut h, key) = dpop_harness();
    h.request(0, "initialize");
    let first = h.one();
    h.head(
        first.exchange,
        401,
        &[("WWW-Authenticate", "DPoP"), ("DPoP-Nonce", "n2")],
    );
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, HttpEvent::AuthRequired { .. })));
    assert_eq!(
        key.nonce_for(&HttpUrl::parse(URL).unwrap()).as_deref(),
        Some("n2")
    );
}
