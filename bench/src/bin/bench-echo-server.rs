//! `bench-echo-server [--http json|sse]`: the minimal echo MCP server of
//! the benchmark (see `mcpwire_bench::server`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => mcpwire_bench::server::serve_stdio(),
        ["--http", "json"] => mcpwire_bench::server::serve_http(false),
        ["--http", "sse"] => mcpwire_bench::server::serve_http(true),
        _ => {
            eprintln!("usage: bench-echo-server [--http json|sse]");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("bench-echo-server: {e}");
        std::process::exit(1);
    }
}
