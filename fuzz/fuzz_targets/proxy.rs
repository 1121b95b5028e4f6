//! Proxies: the answer to `CONNECT` (arbitrary bytes in arbitrary chunks)
//! and the settings (`NO_PROXY` lists, proxy URLs) as anyone may write
//! them. Invariants: no panic; the tunnel's outcome is the same kind
//! whether the answer comes whole or chunked (but bytes after a 2xx head,
//! which a chunked read may not have seen yet); no message shows the
//! proxy's password.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::exchange::proxy::{NoProxy, ProxyError, ProxyUrl};
use mcpwire::exchange::tunnel::{Tunnel, TunnelState};

const PASSWORD: &str = "zq-secret-zq";

/// An outcome without its wording (byte counts in messages differ by
/// chunking).
fn kind(outcome: &Result<TunnelState, ProxyError>) -> String {
    match outcome {
        Ok(state) => format!("{state:?}"),
        Err(ProxyError::TunnelRefused { status, .. }) => format!("refused {status}"),
        Err(ProxyError::AuthenticationRequired { .. }) => "407".into(),
        Err(ProxyError::Malformed { .. }) => "malformed".into(),
        Err(other) => format!("{other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let (settings, answer) = rest.split_at(rest.len().min(usize::from(cut)));
    let text = String::from_utf8_lossy(settings);

    let list = NoProxy::parse(&text);
    let _ = list.matches(&text, 443);
    let _ = list.matches("[::1]", 1);
    for candidate in [text.to_string(), format!("http://u:{PASSWORD}@{text}")] {
        // Only a password in the URL's userinfo is known to be one: text
        // that merely contains the string (a host name, say, lowercased)
        // is echoed.
        if text.to_ascii_lowercase().contains(PASSWORD) {
            let _ = ProxyUrl::parse(&candidate, "fuzz");
            continue;
        }
        match ProxyUrl::parse(&candidate, "fuzz") {
            Ok(p) => {
                assert!(!p.to_string().contains(PASSWORD));
                assert!(!format!("{p:?}").contains(PASSWORD));
            }
            Err(e) => assert!(!e.to_string().contains(PASSWORD), "{e}"),
        }
    }

    let proxy = ProxyUrl::parse(&format!("http://u:{PASSWORD}@gw:3128"), "fuzz").unwrap();
    let whole = Tunnel::new(&proxy, "mcp.example", 443).feed(answer);
    let mut chunked = Tunnel::new(&proxy, "mcp.example", 443);
    let mut outcome = Ok(TunnelState::Pending);
    for piece in answer.chunks(usize::from(cut % 7) + 1) {
        outcome = chunked.feed(piece);
        if outcome != Ok(TunnelState::Pending) {
            break;
        }
    }
    let (whole_kind, chunked_kind) = (kind(&whole), kind(&outcome));
    let late_bytes = whole_kind == "malformed" && chunked_kind == "Open";
    assert!(
        whole_kind == chunked_kind || late_bytes,
        "{whole:?} / {outcome:?}"
    );
    // The proxy's own bytes may be quoted; only ours must not leak.
    let echoed = answer
        .windows(PASSWORD.len())
        .any(|w| w.eq_ignore_ascii_case(PASSWORD.as_bytes()));
    if let (Err(e), false) = (&whole, echoed) {
        assert!(!e.to_string().contains(PASSWORD), "{e}");
    }
    let eof = chunked.finish_eof().to_string();
    assert!(echoed || !eof.contains(PASSWORD), "{eof}");
});
