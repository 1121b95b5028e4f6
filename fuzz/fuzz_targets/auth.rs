//! Fuzz `auth`: arbitrary `WWW-Authenticate` values, and an authorization
//! flow (any of the four grants) whose every HTTP answer (status, body cut
//! in arbitrary chunks) and redirect come from the input. Checks: no
//! panic; the flow ends with exactly one `Done` or `Failed`; no exchange of
//! the flow carries a bearer token; an authorization URL always asks for
//! PKCE S256; a DPoP proof goes out only when DPoP is enabled (answers may
//! carry `DPoP-Nonce`).
#![no_main]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire::auth::{
    parse_challenges, AuthAction, AuthConfig, AuthFlow, EnterpriseIdp, Grant, Secrets, Trigger,
    WallClock,
};
use mcpwire::codec::http1::ResponseHead;
use mcpwire::transport::{ExchangeId, HttpUrl};

#[derive(Arbitrary, Debug)]
struct Answer<'a> {
    status: u16,
    dpop_nonce: Option<&'a str>,
    silent: bool,
    sizes: Vec<u8>,
    body: &'a [u8],
}

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    www: Vec<&'a str>,
    step_up: bool,
    /// Authorization code, client credentials, JWT bearer (workload
    /// identity) or enterprise-managed (ID-JAG), by its value modulo 4.
    grant: u8,
    dpop: bool,
    answers: Vec<Answer<'a>>,
    redirect: &'a str,
}

fuzz_target!(|input: Input<'_>| {
    let challenges = parse_challenges(input.www.iter().copied());
    let grant = match input.grant % 4 {
        0 => Grant::AuthorizationCode,
        1 => Grant::ClientCredentials,
        2 => Grant::JwtBearer,
        _ => Grant::EnterpriseManaged,
    };
    let config = AuthConfig {
        redirect_uri: "http://127.0.0.1:9/callback".into(),
        grant,
        client: (!grant.needs_user())
            .then(|| mcpwire::auth::ClientCredentials::confidential("c", "s")),
        workload_identity: Some(Arc::new(|| Ok("workload.jwt.sig".to_owned()))),
        enterprise: Some(EnterpriseIdp {
            token_endpoint: "https://idp.example/token".into(),
            client_id: "idp-client".into(),
            client_secret: None,
            id_token: Arc::new(|| Ok("id.token.sig".to_owned())),
        }),
        max_document: 4096,
        dpop: input.dpop,
        wall_clock: Some(WallClock::anchor(Instant::now(), SystemTime::now())),
        ..AuthConfig::default()
    };
    let trigger = Trigger {
        status: if input.step_up { 403 } else { 401 },
        challenges,
    };
    let secrets = Secrets {
        verifier: "v".repeat(43),
        state: "st".into(),
        nonce: "n".into(),
    };
    let mut now = Instant::now();
    let endpoint = HttpUrl::parse("https://mcp.example/mcp").unwrap();
    let mut flow = AuthFlow::new(now, config, endpoint, trigger, None, secrets, ExchangeId(0));
    let mut answers = input.answers.iter();
    let mut ends = 0;
    for _ in 0..64 {
        let mut acted = false;
        while let Some(a) = flow.poll_output() {
            acted = true;
            match a {
                AuthAction::Http(req) => {
                    assert!(req
                        .header("authorization")
                        .map_or(true, |v| v.starts_with("Basic ")));
                    assert!(input.dpop || req.header("dpop").is_none());
                    let Some(ans) = answers.next() else { continue };
                    if ans.silent {
                        continue;
                    }
                    let head = ResponseHead {
                        status: ans.status.clamp(100, 599),
                        reason: String::new(),
                        version: 1,
                        headers: ans
                            .dpop_nonce
                            .map(|n| vec![("DPoP-Nonce".to_owned(), n.as_bytes().to_vec())])
                            .unwrap_or_default(),
                    };
                    flow.handle_head(now, req.exchange, &head);
                    let mut rest = ans.body;
                    let mut sizes = ans.sizes.iter().cycle();
                    while !rest.is_empty() {
                        let n = (*sizes.next().unwrap_or(&255) as usize).clamp(1, rest.len());
                        flow.handle_body(now, req.exchange, &rest[..n]);
                        rest = &rest[n..];
                    }
                    flow.handle_end(now, req.exchange);
                }
                AuthAction::Authorize { url } => {
                    assert!(url.contains("code_challenge_method=S256"), "{url}");
                    flow.handle_redirect(now, input.redirect);
                }
                AuthAction::Done(_) | AuthAction::Adopted(_) | AuthAction::Failed(_) => ends += 1,
                _ => {}
            }
        }
        if flow.is_finished() && !acted {
            break;
        }
        if !acted {
            match flow.poll_timeout() {
                Some(t) => {
                    now = t.max(now) + Duration::from_millis(1);
                    flow.handle_timeout(now);
                }
                None => break,
            }
        }
    }
    assert!(ends <= 1, "the flow ended {ends} times");
    if flow.is_finished() {
        assert_eq!(ends, 1);
    }
});
