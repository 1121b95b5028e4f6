//! `bench-echo-server [--http json|sse | --pre-init exit|silent]`: the
//! minimal echo MCP server of the benchmark (see `mcpwire_bench::server`);
//! `--pre-init` makes the stdio server exit on, or ignore, a request before
//! `initialize` (the era probe), as servers of the handshake era do.

use mcpwire_bench::server::PreInit;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => mcpwire_bench::server::serve_stdio(PreInit::Error),
        ["--pre-init", "exit"] => mcpwire_bench::server::serve_stdio(PreInit::Exit),
        ["--pre-init", "silent"] => mcpwire_bench::server::serve_stdio(PreInit::Silent),
        ["--http", "json"] => mcpwire_bench::server::serve_http(false),
        ["--http", "sse"] => mcpwire_bench::server::serve_http(true),
        _ => {
            eprintln!("usage: bench-echo-server [--http json|sse | --pre-init exit|silent]");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("bench-echo-server: {e}");
        std::process::exit(1);
    }
}
