// The TypeScript SDK's client (@modelcontextprotocol/sdk, installed by
// bench/peers/install into .deps/bench-node) measured the way
// bench/src/drive.rs measures every client: connect, idle RSS, warm-up,
// timed runs of calls with at most `inflight` pending, peak RSS, close.
// Prints `RESULT {...}` (the bench's Measured) on success.
//
//   node bench/peers/ts-client.mjs NODE_PREFIX JOB_JSON TARGET_JSON
//
// TARGET_JSON: {"stdio": {"command": "...", "args": [...]}} or {"http": "URL"}.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const [prefix, jobJson, targetJson] = process.argv.slice(2);
const require = createRequire(resolve(prefix, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const job = JSON.parse(jobJson);
const target = JSON.parse(targetJson);
const v = job.variant;
setTimeout(() => {
  console.error(`gave up after ${job.limit_secs}s`);
  process.exit(3);
}, job.limit_secs * 1000).unref();

function statusKib(field) {
  const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith(field));
  return line ? Number(line.slice(field.length).trim().split(/\s+/)[0]) : 0;
}

function theCall(spec) {
  if (spec === 'Echo') {
    let text = '';
    for (let i = 0; i < 100; i++) text += String.fromCharCode(97 + (i % 26));
    return { tool: 'echo', args: { text }, expect: 100 };
  }
  const bytes = spec.Big;
  return { tool: 'big', args: { bytes }, expect: bytes };
}

async function connect() {
  const client = new Client({ name: 'mcpwire-bench-ts', version: '0' });
  const transport = target.stdio
    ? new StdioClientTransport({ command: target.stdio.command, args: target.stdio.args, stderr: 'ignore' })
    : new StreamableHTTPClientTransport(new URL(target.http));
  await client.connect(transport);
  return client;
}

async function oneCall(client, call) {
  // No timeout of the SDK's own: the bench bounds the whole run.
  const result = await client.callTool({ name: call.tool, arguments: call.args }, undefined, {
    timeout: 1e9,
  });
  const first = result.content && result.content[0];
  if (!first || first.type !== 'text') throw new Error('no text content');
  if (first.text.length !== call.expect) {
    throw new Error(`${call.tool}: expected ${call.expect} bytes of text, got ${first.text.length}`);
  }
}

async function calls(client, call, n, inflight, lat, base) {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t = process.hrtime.bigint();
      await oneCall(client, call);
      if (lat) lat[base + i] = Number(process.hrtime.bigint() - t);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(inflight, n)) }, worker));
}

function finish(rates, lat, idle) {
  const sorted = Float64Array.from(lat.filter((x) => x !== undefined)).sort();
  const pct = (p) => (sorted.length ? sorted[Math.min(Math.floor((sorted.length * p) / 100), sorted.length - 1)] : 0);
  return {
    rates,
    p50_ns: Math.round(pct(50)),
    p99_ns: Math.round(pct(99)),
    peak_rss_kib: statusKib('VmHWM:'),
    idle_rss_kib: idle,
  };
}

async function main() {
  const rates = [];
  if (v.workload.Calls) {
    const { call: spec, calls: n, inflight } = v.workload.Calls;
    const call = theCall(spec);
    const client = await connect();
    const idle = statusKib('VmRSS:');
    const lat = new Array(n * v.runs);
    await calls(client, call, v.warmup, inflight, null, 0);
    for (let run = 0; run < v.runs; run++) {
      const t = process.hrtime.bigint();
      await calls(client, call, n, inflight, lat, run * n);
      rates.push(n / (Number(process.hrtime.bigint() - t) / 1e9));
    }
    const m = finish(rates, lat, idle);
    await client.close();
    return m;
  }
  const { cycles } = v.workload.Connect;
  const idle = statusKib('VmRSS:');
  const lat = new Array(cycles * v.runs);
  for (let i = 0; i < v.warmup; i++) await (await connect()).close();
  for (let run = 0; run < v.runs; run++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < cycles; i++) {
      const t = process.hrtime.bigint();
      await (await connect()).close();
      lat[run * cycles + i] = Number(process.hrtime.bigint() - t);
    }
    rates.push(cycles / (Number(process.hrtime.bigint() - start) / 1e9));
  }
  return finish(rates, lat, idle);
}

main().then(
  (m) => {
    console.log(`RESULT ${JSON.stringify(m)}`);
    process.exit(0);
  },
  (e) => {
    console.error(`ts-sdk: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  },
);
