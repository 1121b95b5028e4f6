//! What trusting the operating system's certificate store adds to a
//! connect: reading the store (rustls-native-certs) and turning it into
//! trust anchors (rustls' `RootCertStore`), which the first `https`
//! connection of a process pays once; Mozilla's bundled roots, the
//! fallback, for comparison. Medians of 25 runs each.
//!
//! ```sh
//! cargo run --release -p mcpwire-adapter --features tls --example trust_store_cost
//! ```

use std::time::{Duration, Instant};

use mcpwire_adapter::tls::rustls::RootCertStore;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn time<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut last = None;
    let runs = (0..n)
        .map(|_| {
            let start = Instant::now();
            last = Some(f());
            start.elapsed()
        })
        .collect();
    (median(runs), last.expect("n > 0"))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    const N: usize = 25;
    let (read, found) = time(N, rustls_native_certs::load_native_certs);
    let certs = found.certs;
    let (anchors, store) = time(N, || {
        let mut store = RootCertStore::empty();
        store.add_parsable_certificates(certs.iter().cloned());
        store
    });
    let mozilla = webpki_root_certs::TLS_SERVER_ROOT_CERTS;
    let (bundled, bundled_store) = time(N, || {
        let mut store = RootCertStore::empty();
        store.add_parsable_certificates(mozilla.iter().cloned());
        store
    });
    let first = Instant::now();
    let roots = mcpwire_adapter::tls::system_roots();
    let first = first.elapsed();
    println!(
        "system store ({}): {} certificates, {} trust anchors",
        roots.source,
        certs.len(),
        store.len()
    );
    println!(
        "  read and parse the store (load_native_certs):  {}",
        ms(read)
    );
    println!(
        "  certificates -> trust anchors (RootCertStore): {}",
        ms(anchors)
    );
    println!(
        "  mcpwire's first use (tls::system_roots):       {}",
        ms(first)
    );
    println!(
        "Mozilla's roots ({} certificates) -> anchors:    {}",
        bundled_store.len(),
        ms(bundled)
    );
}
