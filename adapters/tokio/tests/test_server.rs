//! The adapter suite against `mcpwire-test-server` (`mcpwire_tests::suite`,
//! shared with mcpwire-smol and mcpwire-blocking) on tokio: once on a
//! current-thread runtime, as `#[tokio::test]` does, and once on a
//! multi-thread runtime.

use std::future::Future;

fn current_thread(case: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(case);
}

mcpwire_tests::adapter_suite!(mcpwire_tokio::Client, current_thread);

mod multi_thread {
    use std::future::Future;

    fn multi_thread(case: impl Future<Output = ()>) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(case);
    }

    mcpwire_tests::adapter_suite!(mcpwire_tokio::Client, multi_thread);
}
