//! The printed report: machine facts, one markdown table per mode, and the
//! issue's goals checked against the numbers (reported, never asserted).

use std::fmt::Write as _;
use std::time::Duration;

use crate::scenario::{Measured, Variant, Workload};
use crate::{Mode, Row};

/// Everything the report needs.
pub struct Report<'a> {
    pub variants: &'a [Variant],
    pub rows: &'a [Row],
    pub modes: &'a [Mode],
    pub smoke: bool,
    pub load_before: String,
    pub load_after: String,
    pub elapsed: Duration,
}

/// The client the goals are about, and the two references.
const OURS: &str = "mcpwire-tokio";
const RMCP: &str = "rmcp";
const RAW: &str = "raw";

pub fn print(r: &Report) {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n# mcpwire-bench{}\n",
        if r.smoke {
            " (smoke: tiny counts, figures meaningless)"
        } else {
            ""
        }
    );
    for fact in machine() {
        let _ = writeln!(s, "- {fact}");
    }
    let _ = writeln!(
        s,
        "- load average before: {} · after: {} · took {:.0} s",
        r.load_before,
        r.load_after,
        r.elapsed.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "- calls/s: median of {} timed runs (spread = (max − min) / median); p50/p99 over every timed call; \
         tokio clients on a current-thread runtime; RSS = the client process's VmHWM, Δ = VmHWM − RSS once connected",
        r.variants.first().map_or(0, |v| v.runs)
    );
    for &mode in r.modes {
        let _ = writeln!(
            s,
            "\n## {}\n",
            match mode {
                Mode::Pinned => "Pinned: `taskset -c 0` for client and server",
                Mode::Unpinned => "Unpinned",
            }
        );
        let _ = writeln!(
            s,
            "| scenario | client | calls/s | spread | p50 µs | p99 µs | × rmcp | × raw | peak RSS MiB | Δ RSS MiB |"
        );
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (vi, v) in r.variants.iter().enumerate() {
            let mut first = true;
            for row in r.rows.iter().filter(|x| x.variant == vi && x.mode == mode) {
                let label = if first {
                    let unit = match v.workload {
                        Workload::Connect { .. } => " (cycles/s)",
                        _ => "",
                    };
                    format!("({}) {}{unit}", v.scenario, v.label)
                } else {
                    String::new()
                };
                first = false;
                match &row.result {
                    Ok(m) => {
                        let rate = median(&m.rates);
                        let ratio = |other: &str| {
                            rate_of(r.rows, vi, mode, other)
                                .map_or("–".to_string(), |o| format!("{:.2}", rate / o))
                        };
                        let _ = writeln!(
                            s,
                            "| {label} | {} | {} | {:.0}% | {:.1} | {:.1} | {} | {} | {:.1} | {:.1} |",
                            row.client,
                            thousands(rate),
                            spread(&m.rates) * 100.0,
                            m.p50_ns as f64 / 1e3,
                            m.p99_ns as f64 / 1e3,
                            ratio(RMCP),
                            ratio(RAW),
                            m.peak_rss_kib as f64 / 1024.0,
                            m.peak_rss_kib.saturating_sub(m.idle_rss_kib) as f64 / 1024.0,
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            s,
                            "| {label} | {} | failed: {} |||||||| ",
                            row.client,
                            e.replace('|', "/")
                        );
                    }
                }
            }
        }
    }
    let _ = writeln!(s, "\n## Goals (issue 9)\n");
    for line in goals(r) {
        let _ = writeln!(s, "- {line}");
    }
    print!("{s}");
}

/// The calls/s of every client in every variant of `mode`, as an SVG
/// chart: a group of bars per variant, each bar's length its calls/s over
/// the fastest client's in that group, labelled with the figure.
pub fn svg(r: &Report, mode: Mode) -> String {
    const PALETTE: &[&str] = &[
        "#1f77b4", "#2ca02c", "#17becf", "#d62728", "#ff7f0e", "#9467bd", "#e377c2", "#7f7f7f",
    ];
    const LEFT: f64 = 150.0;
    const BAR_W: f64 = 520.0;
    const BAR_H: f64 = 14.0;
    const GAP: f64 = 18.0;
    let mut clients: Vec<&str> = Vec::new();
    for row in r.rows.iter().filter(|x| x.mode == mode) {
        if !clients.contains(&row.client) {
            clients.push(row.client);
        }
    }
    let color =
        |c: &str| PALETTE[clients.iter().position(|x| *x == c).unwrap_or(0) % PALETTE.len()];
    let mut body = String::new();
    let mut y = 54.0;
    for (vi, v) in r.variants.iter().enumerate() {
        let rows: Vec<(&str, f64)> = r
            .rows
            .iter()
            .filter(|x| x.variant == vi && x.mode == mode)
            .filter_map(|x| x.result.as_ref().ok().map(|m| (x.client, median(&m.rates))))
            .collect();
        let Some(best) = rows
            .iter()
            .map(|x| x.1)
            .reduce(f64::max)
            .filter(|b| *b > 0.0)
        else {
            continue;
        };
        let _ = writeln!(
            body,
            r#"<text x="8" y="{:.0}" font-weight="bold">({}) {}</text>"#,
            y,
            v.scenario,
            escape(&v.label)
        );
        y += 6.0;
        for (client, rate) in rows {
            let w = (rate / best * BAR_W).max(1.0);
            let _ = writeln!(
                body,
                r#"<text x="{:.0}" y="{:.0}" text-anchor="end">{client}</text><rect x="{LEFT}" y="{:.0}" width="{w:.1}" height="{BAR_H}" fill="{}"/><text x="{:.1}" y="{:.0}">{}/s</text>"#,
                LEFT - 6.0,
                y + BAR_H - 3.0,
                y,
                color(client),
                LEFT + w + 4.0,
                y + BAR_H - 3.0,
                thousands(rate)
            );
            y += BAR_H + 3.0;
        }
        y += GAP;
    }
    let title = match mode {
        Mode::Pinned => {
            "MCP clients, calls/s (client and server pinned to one core; longer is faster)"
        }
        Mode::Unpinned => "MCP clients, calls/s (unpinned; longer is faster)",
    };
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"8\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n{body}</svg>\n",
        LEFT + BAR_W + 110.0,
        y,
        escape(title)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The goals, each with its numbers and `met` or `MISSED`.
fn goals(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    // ≥ 2× rmcp in (1) pinned, (2), (4).
    let mut cases = Vec::new();
    for (vi, v) in r.variants.iter().enumerate() {
        for &mode in r.modes {
            let wanted = match v.scenario {
                1 => mode == Mode::Pinned,
                2 | 4 => true,
                _ => false,
            };
            if let (true, Some(ours), Some(theirs)) = (
                wanted,
                rate_of(r.rows, vi, mode, OURS),
                rate_of(r.rows, vi, mode, RMCP),
            ) {
                cases.push((
                    ours / theirs,
                    format!("({}) {} {}", v.scenario, v.label, mode.name()),
                ));
            }
        }
    }
    if !cases.is_empty() {
        let missed: Vec<String> = cases
            .iter()
            .filter(|(x, _)| *x < 2.0)
            .map(|(x, what)| format!("{what}: {x:.2}×"))
            .collect();
        let min = cases.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
        let max = cases.iter().map(|c| c.0).fold(0.0, f64::max);
        out.push(format!(
            "{OURS} ≥ 2× rmcp calls/s in (1) pinned, (2), (4): {} — {} cases, {min:.2}× to {max:.2}×{}",
            verdict(missed.is_empty()),
            cases.len(),
            if missed.is_empty() { String::new() } else { format!("; below 2×: {}", missed.join("; ")) }
        ));
    }
    // ≥ 0.5× raw pinned, ≥ 0.8× raw unpinned in (1).
    for (vi, v) in r
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| v.scenario == 1)
    {
        for &mode in r.modes {
            let want = if mode == Mode::Pinned { 0.5 } else { 0.8 };
            if let (Some(ours), Some(raw)) = (
                rate_of(r.rows, vi, mode, OURS),
                rate_of(r.rows, vi, mode, RAW),
            ) {
                let x = ours / raw;
                out.push(format!(
                    "{OURS} ≥ {want}× the raw loop in (1) {}: {} — {x:.2}× ({} vs {} calls/s)",
                    mode.name(),
                    verdict(x >= want),
                    thousands(ours),
                    thousands(raw)
                ));
            }
        }
        let _ = v;
    }
    // Peak RSS in (3) under 4× the result size.
    for (vi, v) in r
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| v.scenario == 3)
    {
        let Workload::Calls {
            call: crate::scenario::CallSpec::Big(size),
            ..
        } = v.workload
        else {
            continue;
        };
        for &mode in r.modes {
            if let Some(m) = measured(r.rows, vi, mode, OURS) {
                let delta = m.peak_rss_kib.saturating_sub(m.idle_rss_kib) * 1024;
                let limit = 4 * size as u64;
                out.push(format!(
                    "{OURS} peak RSS in (3) {} under 4× the result ({:.1} MiB): {} — Δ {:.1} MiB over connected-idle; absolute VmHWM {:.1} MiB",
                    mode.name(),
                    limit as f64 / 1048576.0,
                    verdict(delta < limit),
                    delta as f64 / 1048576.0,
                    m.peak_rss_kib as f64 / 1024.0
                ));
            }
        }
    }
    out
}

fn measured<'a>(rows: &'a [Row], variant: usize, mode: Mode, client: &str) -> Option<&'a Measured> {
    rows.iter()
        .find(|r| r.variant == variant && r.mode == mode && r.client == client)
        .and_then(|r| r.result.as_ref().ok())
}

fn rate_of(rows: &[Row], variant: usize, mode: Mode, client: &str) -> Option<f64> {
    measured(rows, variant, mode, client).map(|m| median(&m.rates))
}

/// Median (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// (max − min) / median.
fn spread(v: &[f64]) -> f64 {
    let m = median(v);
    if v.is_empty() || m == 0.0 {
        return 0.0;
    }
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    let min = v.iter().copied().fold(f64::MAX, f64::min);
    (max - min) / m
}

/// `1234567.8` → `1,234,568`.
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// CPU model, CPU count, kernel.
fn machine() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "?".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    vec![format!("machine: {model}, {cpus} CPUs, Linux {kernel}")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert!((spread(&[90.0, 100.0, 110.0]) - 0.2).abs() < 1e-9);
    }
}
