//! Tests of the stdio transport's state machine, in simulated time.

use super::*;

fn drain(s: &mut Stdio) -> Vec<StdioAction> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

#[test]
fn stderr_lines_are_logged_and_the_tail_is_bounded() {
    let mut s = Stdio::new(StdioConfig {
        stderr_tail_lines: 2,
        max_stderr_line: 10,
        ..StdioConfig::default()
    });
    s.handle_stderr(b"one\r\ntw");
    s.handle_stderr(b"o\n\nthree is a long line\nfour");
    let logs: Vec<_> = drain(&mut s)
        .into_iter()
        .map(|a| match a {
            StdioAction::Log(l) => l,
            a => panic!("{a:?}"),
        })
        .collect();
    assert_eq!(logs, ["one", "two", "three is a…"]);
    assert_eq!(s.stderr_tail(), "two\nthree is a…\nfour");
    let t0 = Instant::now();
    assert_eq!(s.handle_stdout_eof(t0), None);
    assert_eq!(s.handle_stderr_eof(t0), None);
    let death = s.handle_exit(
        t0,
        ExitStatus {
            code: Some(7),
            signal: None,
        },
    );
    let death = death.unwrap();
    assert_eq!(
        s.death_message(&death),
        "server exited with status 7: three is a…\nfour"
    );
}

#[test]
fn graceful_close_escalates_on_timers() {
    let t0 = Instant::now();
    let mut s = Stdio::new(StdioConfig::default());
    s.begin_close(t0);
    assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(2)));
    assert_eq!(s.handle_timeout(t0 + Duration::from_secs(1)), None);
    assert!(drain(&mut s).is_empty());
    s.handle_timeout(t0 + Duration::from_secs(2));
    assert_eq!(drain(&mut s), [StdioAction::Signal(Signal::Terminate)]);
    s.handle_timeout(t0 + Duration::from_secs(4));
    assert_eq!(drain(&mut s), [StdioAction::Signal(Signal::Kill)]);
    assert_eq!(s.poll_timeout(), None);
    let t5 = t0 + Duration::from_secs(5);
    let killed = ExitStatus {
        code: None,
        signal: Some(9),
    };
    assert_eq!(s.handle_exit(t5, killed), None);
    // Held for the pipes (at most exit_grace), then over: ours to end.
    assert!(s.awaiting_exit());
    assert_eq!(s.poll_timeout(), Some(t5 + Duration::from_millis(500)));
    assert_eq!(s.handle_timeout(t5 + Duration::from_millis(500)), None);
    // Then the group: stopped once nothing of it is left.
    assert_eq!(drain(&mut s), [StdioAction::CheckGroup]);
    assert!(s.awaiting_exit());
    s.handle_group_empty();
    assert!(!s.awaiting_exit());
    assert_eq!(s.poll_timeout(), None);
}

fn status(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        signal: None,
    }
}

/// Ends both pipes and reports the exit, returning the death.
fn exit_with_pipes_closed(s: &mut Stdio, now: Instant, code: i32) -> Option<Death> {
    assert_eq!(s.handle_stdout_eof(now), None);
    assert_eq!(s.handle_stderr_eof(now), None);
    s.handle_exit(now, status(code))
}

#[test]
fn a_close_is_over_when_the_child_exited_and_its_group_is_empty() {
    let t0 = Instant::now();
    let mut s = Stdio::new(StdioConfig::default());
    s.begin_close(t0);
    assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
    assert_eq!(exit_with_pipes_closed(&mut s, t0, 0), None);
    assert_eq!(drain(&mut s), [StdioAction::CheckGroup]);
    assert!(s.awaiting_exit(), "not before the group is known empty");
    s.handle_group_empty();
    assert!(!s.awaiting_exit());
    assert_eq!(s.poll_timeout(), None);
    assert!(drain(&mut s).is_empty());
}

#[test]
fn what_a_crash_leaves_of_the_group_is_stopped_step_by_step() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut s = Stdio::new(StdioConfig::default());
    // The wrapper exits; the server it started is still running.
    let d = exit_with_pipes_closed(&mut s, t0, 1).unwrap();
    assert_eq!(s.death_message(&d), "server exited with status 1");
    assert_eq!(
        drain(&mut s),
        [StdioAction::CheckGroup, StdioAction::CloseStdin]
    );
    // Checked again at 10, 30, 70 ms ... then every 200 ms.
    let mut checks = Vec::new();
    let mut now = t0;
    while now < t0 + ms(1000) {
        now = s.poll_timeout().unwrap();
        assert_eq!(s.handle_timeout(now), None);
        assert_eq!(drain(&mut s), [StdioAction::CheckGroup]);
        checks.push(now - t0);
    }
    assert_eq!(checks[..5], [ms(10), ms(30), ms(70), ms(150), ms(310)]);
    assert!(checks.windows(2).all(|w| w[1] - w[0] <= ms(200)));
    // Then SIGTERM to the group, then SIGKILL.
    let after = |s: &mut Stdio, at: Instant| {
        s.handle_timeout(at);
        drain(s)
            .into_iter()
            .filter(|a| *a != StdioAction::CheckGroup)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        after(&mut s, t0 + ms(2000)),
        [StdioAction::Signal(Signal::Terminate)]
    );
    assert_eq!(
        after(&mut s, t0 + ms(4000)),
        [StdioAction::Signal(Signal::Kill)]
    );
    assert!(s.awaiting_exit());
    s.handle_group_empty();
    assert!(!s.awaiting_exit());
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_group_that_outlives_sigkill_is_given_up_on() {
    let t0 = Instant::now();
    let config = StdioConfig::default();
    let mut s = Stdio::new(config);
    s.begin_close(t0);
    s.handle_timeout(t0 + config.stdin_grace);
    let t1 = t0 + config.stdin_grace + config.term_grace;
    s.handle_timeout(t1);
    drain(&mut s);
    assert_eq!(s.poll_timeout(), None, "until the exit, nothing to time");
    assert_eq!(exit_with_pipes_closed(&mut s, t1, 0), None);
    let deadline = t1 + config.term_grace;
    let mut now = t1;
    while s.awaiting_exit() {
        now = s.poll_timeout().unwrap();
        s.handle_timeout(now);
    }
    assert_eq!(now, deadline);
    let logs: Vec<_> = drain(&mut s)
        .into_iter()
        .filter_map(|a| match a {
            StdioAction::Log(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(logs.len(), 1);
    assert!(logs[0].contains("outlived SIGKILL"), "{logs:?}");
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_group_known_empty_before_the_exit_ends_with_it() {
    let t0 = Instant::now();
    let mut s = Stdio::new(StdioConfig::default());
    s.begin_close(t0);
    s.handle_group_empty();
    assert!(s.awaiting_exit());
    assert_eq!(exit_with_pipes_closed(&mut s, t0, 0), None);
    assert!(!s.awaiting_exit());
    assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
}

#[test]
fn an_exit_is_held_until_both_pipes_end_or_the_grace_passes() {
    let t0 = Instant::now();
    let status = ExitStatus {
        code: Some(3),
        signal: None,
    };
    // Pipes end after the exit: the exit is acted on at the last EOF,
    // and the last words on stderr are in the message.
    let mut s = Stdio::new(StdioConfig::default());
    assert_eq!(s.handle_exit(t0, status), None);
    s.handle_stderr(b"boom");
    assert_eq!(s.handle_stdout_eof(t0), None);
    let d = s.handle_stderr_eof(t0).unwrap();
    assert_eq!(s.death_message(&d), "server exited with status 3: boom");
    assert_eq!(
        s.handle_exit(t0, status),
        None,
        "a second report is ignored"
    );

    // A grandchild keeps stderr open: the exit counts after the grace.
    let mut s = Stdio::new(StdioConfig::default());
    s.handle_stdout_eof(t0);
    assert_eq!(s.handle_exit(t0, status), None);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_millis(500)));
    assert_eq!(s.handle_timeout(t0 + Duration::from_millis(499)), None);
    let d = s.handle_timeout(t0 + Duration::from_millis(500)).unwrap();
    assert_eq!(s.death_message(&d), "server exited with status 3");
}

#[test]
fn stdout_eof_waits_for_the_exit_status() {
    let t0 = Instant::now();
    let mut s = Stdio::new(StdioConfig::default());
    s.handle_stderr(b"fatal: missing API key\n");
    drain(&mut s);
    assert_eq!(s.handle_stdout_eof(t0), None);
    assert_eq!(s.handle_stderr_eof(t0), None);
    let d = s
        .handle_exit(
            t0,
            ExitStatus {
                code: Some(1),
                signal: None,
            },
        )
        .unwrap();
    assert_eq!(
        s.death_message(&d),
        "server exited with status 1: fatal: missing API key"
    );

    // No exit within exit_wait: the death is declared and shutdown begins.
    let mut s = Stdio::new(StdioConfig::default());
    s.handle_stdout_eof(t0);
    let d = s.handle_timeout(t0 + Duration::from_secs(1)).unwrap();
    assert_eq!(s.death_message(&d), "server closed its stdout");
    assert_eq!(drain(&mut s), [StdioAction::CloseStdin]);
}
