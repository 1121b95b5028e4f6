//! The adapter suite against `mcpwire-test-server` (`mcpwire_tests::suite`,
//! shared with mcpwire-tokio and mcpwire-blocking) on smol: once under
//! `smol::block_on`, and once with every case spawned on an
//! `async-executor` run by four threads.

mcpwire_tests::adapter_suite!(mcpwire_smol::Client, smol::block_on);

mod async_executor {
    use std::future::Future;
    use std::sync::OnceLock;

    use async_executor::Executor;

    /// An executor run by four threads for the whole test binary.
    fn executor() -> &'static Executor<'static> {
        static EXECUTOR: OnceLock<&'static Executor<'static>> = OnceLock::new();
        EXECUTOR.get_or_init(|| {
            let ex: &'static Executor<'static> = Box::leak(Box::new(Executor::new()));
            for i in 0..4 {
                std::thread::Builder::new()
                    .name(format!("executor-{i}"))
                    .spawn(move || smol::block_on(ex.run(std::future::pending::<()>())))
                    .expect("executor thread");
            }
            ex
        })
    }

    /// Runs the case as a task of the executor: it moves between threads.
    fn on_executor(case: impl Future<Output = ()> + Send + 'static) {
        smol::block_on(executor().spawn(case));
    }

    mcpwire_tests::adapter_suite!(mcpwire_smol::Client, on_executor);
}
