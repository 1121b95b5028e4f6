//! A refresh shared with other processes through the token store (issue 29).

use super::*;

// ---- a refresh shared with other processes (issue 29) ----------------------

fn with_token(mut s: AuthState, access: &str, refresh: &str, expires_at: Option<u64>) -> AuthState {
    s.tokens.access_token = access.into();
    s.tokens.refresh_token = Some(refresh.into());
    s.tokens.expires_at = expires_at;
    s
}

/// A config with a wall clock: the Unix time at the flow's `now` is
/// `unix` (about; the flow's `now` is taken a moment later).
fn clocked(unix: u64) -> AuthConfig {
    AuthConfig {
        interactive: false,
        wall_clock: Some(WallClock::anchor(
            Instant::now(),
            std::time::UNIX_EPOCH + Duration::from_secs(unix),
        )),
        ..config()
    }
}

const NOW: u64 = 1_900_000_000;

#[test]
fn a_newer_stored_state_is_adopted_without_a_refresh() {
    let mine = state_with("s", Some("rt-old"));
    // Another process refreshed: its token is good for an hour.
    let theirs = with_token(mine.clone(), "at-theirs", "rt-theirs", Some(NOW + 3600));
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(theirs.clone());
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(r.adopted);
    assert_eq!(ok(&r), &theirs);
    assert!(r.web.requests.is_empty(), "{:?}", r.web.urls());
    assert_eq!(r.locks, [true, false]);
}

#[test]
fn a_stored_state_about_to_expire_is_refreshed_with_its_refresh_token() {
    let mine = state_with("s", Some("rt-old"));
    // Newer, but it expires within the skew (60 s): refresh, with the
    // newest refresh token (a rotating server takes only that one).
    let theirs = with_token(mine.clone(), "at-theirs", "rt-theirs", Some(NOW + 30));
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(theirs);
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(!r.adopted);
    let s = ok(&r);
    assert_eq!(s.tokens.access_token, "at-1");
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["refresh_token"],
        "rt-theirs"
    );
    // The absolute expiry: expires_in (3600) from the answer's time.
    let at = s.tokens.expires_at.expect("expires_at");
    assert!((NOW + 3600..NOW + 3610).contains(&at), "{at}");
    // Done keeps the lock: the driver saves under it, then releases.
    assert_eq!(r.locks, [true]);
}

#[test]
fn the_same_stored_state_is_refreshed_and_an_empty_store_too() {
    let mine = state_with("s", Some("rt-old"));
    for stored in [Some(mine.clone()), None] {
        let mut web = Web::default().route(&format!("{AS}/token"), 200, token_ok());
        web.stored = stored;
        let r = run_with(
            web,
            clocked(NOW),
            trigger("Bearer"),
            Some(mine.clone()),
            |_| panic!("no user"),
        );
        assert_eq!(ok(&r).tokens.access_token, "at-1");
        assert_eq!(
            r.web.form(&format!("{AS}/token"))["refresh_token"],
            "rt-old"
        );
        assert_eq!(r.locks, [true]);
    }
    // A state stored for another resource is not ours.
    let mut other = with_token(mine.clone(), "at-x", "rt-x", Some(NOW + 3600));
    other.resource = "https://other.example/mcp".into();
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(other);
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(!r.adopted);
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["refresh_token"],
        "rt-old"
    );
}

#[test]
fn a_store_locked_too_long_fails_the_refresh_without_sending_it() {
    let mut web = Web::default().route(&format!("{AS}/token"), 200, token_ok());
    web.store_stuck = true;
    let r = run_with(
        web,
        clocked(NOW),
        trigger("Bearer"),
        Some(state_with("s", Some("rt"))),
        |_| panic!("no user"),
    );
    assert!(
        matches!(err(&r), AuthError::Abandoned(m) if m.contains("token store stayed locked")),
        "{}",
        err(&r)
    );
    assert!(r.web.requests.is_empty());
    assert_eq!(r.locks, [true, false]);
}

#[test]
fn a_step_up_does_not_lock_the_store() {
    let trig = Trigger {
        status: 403,
        challenges: parse_challenges([r#"Bearer error="insufficient_scope", scope="mcp:write""#]),
    };
    let r = run_with(
        happy(),
        config(),
        trig,
        Some(state_with("s", Some("rt"))),
        consent,
    );
    ok(&r);
    assert!(r.locks.is_empty());
}
