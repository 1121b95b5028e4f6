//! The adapter suite against `mcpwire-test-server`, written once for every
//! adapter: real child processes and real loopback sockets, misbehaving on
//! demand. Each case is an `async fn` generic over the adapter's client
//! ([`Adapter`]: the async clients of mcpwire-tokio and mcpwire-smol, and,
//! with the `blocking` feature, mcpwire-blocking's client driven by
//! threads); [`adapter_suite!`](crate::adapter_suite) turns them all into
//! `#[test]`s for one client and one `block_on`:
//!
//! ```ignore
//! mcpwire_tests::adapter_suite!(mcpwire_tokio::Client, run_on_tokio);
//! mcpwire_tests::adapter_suite!(mcpwire_blocking::Client, mcpwire_tests::suite::block_on);
//! ```
//!
//! The few behaviours that differ by nature are the adapter's flags
//! ([`Adapter::CANCELS_ON_DROP`]); everything else is asserted the same on
//! every adapter.
//!
//! Each case takes the protocol era it runs in ([`support::Era`]): the
//! test server is pinned to it (`--era legacy` or `--era modern`) and the
//! client finds it by probing, as it does by default. Most cases run in
//! both eras; the era-specific ones say why in their docs (sessions,
//! resumption and the GET listener are 2025-11-25's; re-issue after a
//! lost stream and the era headers are 2026-07-28's).

mod adapter;
#[cfg(feature = "blocking")]
mod blocking;
mod http;
mod network;
mod stdio;
pub mod support;
mod tasks;

pub use adapter::Adapter;
#[cfg(feature = "blocking")]
pub use blocking::block_on;
pub use http::*;
pub use network::*;
pub use stdio::*;
pub use tasks::*;

/// Generates one `#[test]` per case of this suite and era, each running
/// the case for client `$adapter` (an [`Adapter`]) with `$block_on` (a
/// `fn(impl Future<Output = ()>)`): modules `legacy` and `legacy_only`
/// against a test server speaking only 2025-11-25, `modern` and
/// `modern_only` against one speaking only 2026-07-28. Most cases run in
/// both eras; the era-specific ones (`*_only`) say why in their docs.
#[macro_export]
macro_rules! adapter_suite {
    ($adapter:ty, $block_on:path) => {
        $crate::adapter_suite!(@era legacy_only, Legacy, $adapter, $block_on;
            stdio_a_legacy_server_is_probed_once_per_process,
            stdio_a_server_the_probe_kills_or_silences_is_started_again,
            stdio_the_era_file_spares_the_probe_across_processes,
            stdio_javascript_json_with_half_an_emoji_is_read,
            http_expired_session_is_renewed_transparently,
            http_reinitialize_never_overtakes_initialized,
            http_dropped_stream_resumes_with_last_event_id,
            http_dropping_the_last_client_ends_the_session,
            http_307_and_308_are_followed_and_the_endpoint_moves,
            http_a_cross_origin_redirect_is_refused_unless_allowed_and_gets_no_credentials,
        );
        $crate::adapter_suite!(@era modern_only, Modern, $adapter, $block_on;
            stdio_a_dual_era_server_speaks_the_era_asked,
            http_a_dual_era_server_speaks_the_era_asked,
            http_a_lost_stream_is_issued_again_with_a_new_id,
            http_a_stream_lost_every_time_fails_after_the_reissues,
            http_era_headers_are_sent_and_checked,
            http_a_remembered_era_that_went_stale_is_probed_again,
        );
        // Proxies and TLS: the same in both eras, run in one.
        $crate::adapter_suite!(@era network, Modern, $adapter, $block_on;
            net_https_through_a_proxy_to_a_name_only_it_resolves,
            net_a_server_entry_with_proxy_and_tls,
            net_proxy_credentials_and_a_wrong_password,
            net_a_refused_tunnel_names_the_proxy,
            net_no_proxy_sends_listed_hosts_directly,
            net_plain_http_through_the_proxy,
            net_certificate_problems_are_named,
            net_client_certificates,
        );
        $crate::adapter_suite!(@era both_eras, Both, $adapter, $block_on;
            stdio_connect_list_call_close,
            stdio_mcp_apps_and_trace_context,
            stdio_structured_output_is_checked_against_the_output_schema,
            stdio_repeated_cursor_is_refused,
            stdio_progress_is_reported,
            stdio_server_exit_mid_request_fails_once_with_status_and_stderr,
            stdio_garbage_on_stdout_is_ignored,
            stdio_timeout_tells_the_server,
            stdio_dropped_call_and_cancel_token_tell_the_server,
            stdio_close_ends_a_server_that_ignores_eof_and_sigterm,
            stdio_100_concurrent_calls_with_a_crash_complete_exactly_once,
            stdio_100_calls_from_8_tasks_with_a_crash_complete_exactly_once,
            stdio_a_call_held_unpolled_holds_up_no_other_call,
            stdio_server_requests_use_the_handlers_and_undeclared_ones_get_method_not_found,
            stdio_notifications_stream_and_callback,
            stdio_missing_binary_is_a_spawn_error,
            stdio_dropping_the_last_client_closes_gracefully_and_fast,
            stdio_an_oversize_reply_fails_its_call_at_once,
            stdio_close_stops_the_whole_process_group,
            stdio_a_dead_wrappers_server_is_stopped,
            stdio_dropping_the_client_stops_the_whole_process_group,
            stdio_a_server_that_stops_reading_keeps_the_client_bounded,
            http_sse_and_json_responses,
            http_progress_and_server_request_on_the_stream,
            http_cancel_and_timeout_tell_the_server,
            http_errors_are_clear,
            http_connection_refused_is_a_connect_error,
            http_8_tasks_share_one_client,
            http_a_call_held_unpolled_holds_up_no_other_call,
            http_an_oversize_reply_fails_its_call_at_once,
            http_redirects_stop_after_5_hops_and_at_a_loop,
            http_a_303_on_a_post_is_an_error_naming_the_location,
            http_a_list_change_reaches_the_notifications,
            stdio_a_task_is_followed_to_its_end,
            stdio_a_required_task_tool_works_without_a_listing,
            stdio_a_task_asks_and_is_answered,
            stdio_a_task_outlived_or_cancelled_is_cancelled_on_the_server,
            stdio_the_explicit_task_api,
            http_a_task_is_followed_to_its_end,
        );
    };
    (@era $module:ident, Both, $adapter:ty, $block_on:path; $($case:ident),* $(,)?) => {
        $crate::adapter_suite!(@era legacy, Legacy, $adapter, $block_on; $($case),*);
        $crate::adapter_suite!(@era modern, Modern, $adapter, $block_on; $($case),*);
    };
    (@era $module:ident, $era:ident, $adapter:ty, $block_on:path; $($case:ident),* $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() {
                    $block_on($crate::suite::$case::<$adapter>(
                        $crate::suite::support::Era::$era,
                    ))
                }
            )*
        }
    };
}
