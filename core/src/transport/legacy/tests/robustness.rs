//! Robustness: unknown exchanges, arbitrary chunking, and any sequence of inputs.

use proptest::prelude::*;

use super::*;

#[test]
fn legacy_reports_for_unknown_exchanges_are_ignored() {
    let mut sim = Sim::new();
    let _ = sim.events();
    // Body before the head of the stream.
    sim.body(GET, b"data: {}\n\n");
    let other = ExchangeId(99);
    sim.head(other, &head(500, None, &[]));
    sim.body(other, b"data: {}\n\n");
    sim.end(other);
    sim.failed(other, "x");
    sim.t.initialized(sim.now, "2024-11-05");
    sim.t.handle_timeout(sim.now);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());
    // A second head for the stream changes nothing.
    sim.open("/m");
    sim.head(GET, &head(500, None, &[]));
    sim.body(GET, b"data: {}\n\n");
    assert_eq!(sim.events(), vec![]);
    assert_eq!(sim.delivered, vec!["{}"]);
}

/// A stream touching every decoder path the transport relies on.
const SCRIPT: &[u8] = b"\xEF\xBB\xBF: hello\r\n\r\n\
    event: endpoint\r\ndata: /message?sessionId=5e1d\r\n\r\n\
    data: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2024-11-05\"}}\n\n\
    id: 1\rdata:\r\r\
    event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/tools/list_changed\"}\n\n\
    event: heartbeat\ndata: 1\n\n\
    event: endpoint\ndata: /again\n\n\
    data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\r\n\r\n\
    data: {\"unfinished\"";

/// Runs `SCRIPT` split into `chunks`, with a request held before the
/// endpoint; returns the deliveries and the events.
fn run(chunks: &[&[u8]]) -> (Vec<String>, Vec<LegacyEvent>) {
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.head(GET, &sse_head());
    for chunk in chunks {
        sim.body(GET, chunk);
    }
    sim.end(GET);
    (sim.delivered.clone(), sim.events())
}

#[test]
fn legacy_stream_split_anywhere_gives_the_same_deliveries() {
    let whole = run(&[SCRIPT]);
    assert_eq!(
        whole.0,
        vec![
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2024-11-05"}}"#,
            "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/tools/list_changed\"}",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        ]
    );
    let events = &whole.1;
    assert_eq!(events.len(), 5, "{events:?}");
    let post = match &events[0] {
        LegacyEvent::Request(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        post.url,
        url("http://127.0.0.1:3001/message?sessionId=5e1d")
    );
    assert!(matches!(&events[1], LegacyEvent::Diagnostic(d) if d.contains("`heartbeat`")));
    assert!(matches!(&events[2], LegacyEvent::Diagnostic(d) if d.contains("second `endpoint`")));
    assert_eq!(events[3], LegacyEvent::Abort(post.exchange));
    assert!(fatal(events).contains("incomplete event"));

    let bytes: Vec<&[u8]> = SCRIPT.chunks(1).collect();
    assert_eq!(run(&bytes), whole, "byte by byte");
    for i in 0..=SCRIPT.len() {
        let (a, b) = SCRIPT.split_at(i);
        assert_eq!(run(&[a, b]), whole, "split at {i}");
    }
}

/// One thing that can happen to the transport.
#[derive(Debug, Clone)]
enum Op {
    Send(u8, u64),
    Head(u64, u16, u8),
    Body(u64, Vec<u8>),
    End(u64),
    Failed(u64),
    Done(u64),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::sample::select(vec![
            b"event: endpoint\ndata: /m\n\n".to_vec(),
            b"event: endpoint\ndata: http://x/\n\n".to_vec(),
            b"data: {}\n\n".to_vec(),
            b"event: other\ndata: 1\n\n".to_vec(),
        ]),
    ];
    prop_oneof![
        (0u8..3, 0u64..8).prop_map(|(k, id)| Op::Send(k, id)),
        (
            0u64..6,
            prop_oneof![Just(200u16), Just(202), Just(401), Just(500)],
            0u8..3
        )
            .prop_map(|(ex, s, ct)| Op::Head(ex, s, ct)),
        (0u64..6, body).prop_map(|(ex, b)| Op::Body(ex, b)),
        (0u64..6).prop_map(Op::End),
        (0u64..6).prop_map(Op::Failed),
        (0u64..8).prop_map(Op::Done),
        Just(Op::Close),
    ]
}

proptest! {
    /// Whatever happens: no panic, one Fatal at most, nothing after
    /// Finished, at most one Fail per request and only for requests sent and
    /// not done, every Abort for an exchange that was requested, never twice.
    #[test]
    fn legacy_any_sequence_keeps_its_promises(ops in proptest::collection::vec(op(), 0..40)) {
        let config = HttpConfig { max_event: 32, max_body: 64, ..HttpConfig::default() };
        let mut sim = Sim::with(SSE_URL, config);
        let mut all = sim.events();
        let mut sent = std::collections::HashSet::new();
        let mut done = std::collections::HashSet::new();
        for op in ops {
            match op {
                Op::Send(kind, id) => {
                    let kind = match kind {
                        0 if sent.insert(id) => SendKind::Request { id },
                        0 | 1 => SendKind::Notification,
                        _ => SendKind::Response { id: RequestId::Number(id as i64) },
                    };
                    sim.send("{}", kind);
                }
                Op::Head(ex, status, ct) => {
                    let ct = ["text/event-stream", "application/json", ""][usize::from(ct)];
                    let ct = Some(ct).filter(|c| !c.is_empty());
                    sim.head(ExchangeId(ex), &head(status, ct, &[]));
                }
                Op::Body(ex, b) => sim.body(ExchangeId(ex), &b),
                Op::End(ex) => sim.end(ExchangeId(ex)),
                Op::Failed(ex) => sim.failed(ExchangeId(ex), "failed"),
                Op::Done(id) => {
                    sim.t.request_done(id);
                    done.insert(id);
                }
                Op::Close => sim.t.begin_close(sim.now),
            }
            for e in sim.events() {
                if let LegacyEvent::Fail { id, .. } = &e {
                    prop_assert!(sent.contains(id) && !done.contains(id), "{e:?}");
                    done.insert(*id);
                }
                all.push(e);
            }
            prop_assert_eq!(sim.t.poll_timeout(), None);
        }
        let fatals = all.iter().filter(|e| matches!(e, LegacyEvent::Fatal(_))).count();
        prop_assert!(fatals <= 1);
        if let Some(i) = all.iter().position(|e| *e == LegacyEvent::Finished) {
            prop_assert_eq!(i, all.len() - 1);
        }
        let mut requested = std::collections::HashSet::new();
        let mut aborted = std::collections::HashSet::new();
        for e in &all {
            match e {
                LegacyEvent::Request(r) => prop_assert!(requested.insert(r.exchange)),
                LegacyEvent::Abort(ex) => {
                    prop_assert!(requested.contains(ex) && aborted.insert(*ex));
                }
                _ => {}
            }
        }
    }
}
