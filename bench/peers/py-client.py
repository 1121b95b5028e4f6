"""The Python SDK's client (PyPI `mcp`, installed by bench/peers/install into
.deps/bench-venv) measured the way bench/src/drive.rs measures every
client: connect, idle RSS, warm-up, timed runs of calls with at most
`inflight` pending, peak RSS, close. Prints `RESULT {...}` (the bench's
Measured) on success.

    .deps/bench-venv/bin/python bench/peers/py-client.py JOB_JSON TARGET_JSON

TARGET_JSON: {"stdio": {"command": "...", "args": [...]}} or {"http": "URL"}.
"""

import asyncio
import json
import os
import sys
import threading
import time
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # mcp 2.x
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # mcp 1.x
    from mcp.client.streamable_http import streamablehttp_client as http_client


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line[len(field):].split()[0])
    return 0


def the_call(spec):
    if spec == "Echo":
        text = "".join(chr(97 + i % 26) for i in range(100))
        return "echo", {"text": text}, 100
    n = spec["Big"]
    return "big", {"bytes": n}, n


async def connect(stack, target, devnull):
    if "stdio" in target:
        params = StdioServerParameters(
            command=target["stdio"]["command"], args=target["stdio"]["args"]
        )
        streams = await stack.enter_async_context(stdio_client(params, errlog=devnull))
    else:
        streams = await stack.enter_async_context(http_client(target["http"]))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


async def one_call(session, call):
    tool, args, expect = call
    result = await session.call_tool(tool, args)
    content = getattr(result, "content", None) or []
    if not content or getattr(content[0], "type", None) != "text":
        raise RuntimeError("no text content")
    got = len(content[0].text)
    if got != expect:
        raise RuntimeError(f"{tool}: expected {expect} bytes of text, got {got}")


async def calls(session, call, n, inflight, lat, base):
    next_i = 0

    async def worker():
        nonlocal next_i
        while next_i < n:
            i = next_i
            next_i += 1
            t = time.perf_counter_ns()
            await one_call(session, call)
            if lat is not None:
                lat[base + i] = time.perf_counter_ns() - t

    await asyncio.gather(*(worker() for _ in range(max(1, min(inflight, n)))))


def finish(rates, lat, idle):
    got = sorted(x for x in lat if x is not None)

    def pct(p):
        return got[min(len(got) * p // 100, len(got) - 1)] if got else 0

    return {
        "rates": rates,
        "p50_ns": pct(50),
        "p99_ns": pct(99),
        "peak_rss_kib": status_kib("VmHWM:"),
        "idle_rss_kib": idle,
    }


async def main(job, target):
    v = job["variant"]
    devnull = open(os.devnull, "w")
    rates = []
    workload = v["workload"]
    if "Calls" in workload:
        w = workload["Calls"]
        call = the_call(w["call"])
        n, inflight = w["calls"], w["inflight"]
        async with AsyncExitStack() as stack:
            session = await connect(stack, target, devnull)
            idle = status_kib("VmRSS:")
            lat = [None] * (n * v["runs"])
            await calls(session, call, v["warmup"], inflight, None, 0)
            for run in range(v["runs"]):
                t = time.perf_counter_ns()
                await calls(session, call, n, inflight, lat, run * n)
                rates.append(n / ((time.perf_counter_ns() - t) / 1e9))
            return finish(rates, lat, idle)
    cycles = workload["Connect"]["cycles"]
    idle = status_kib("VmRSS:")
    lat = [None] * (cycles * v["runs"])

    async def cycle():
        async with AsyncExitStack() as stack:
            await connect(stack, target, devnull)

    for _ in range(v["warmup"]):
        await cycle()
    for run in range(v["runs"]):
        start = time.perf_counter_ns()
        for i in range(cycles):
            t = time.perf_counter_ns()
            await cycle()
            lat[run * cycles + i] = time.perf_counter_ns() - t
        rates.append(cycles / ((time.perf_counter_ns() - start) / 1e9))
    return finish(rates, lat, idle)


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    target = json.loads(sys.argv[2])

    def give_up():
        time.sleep(job["limit_secs"])
        print(f"gave up after {job['limit_secs']}s", file=sys.stderr)
        os._exit(3)

    threading.Thread(target=give_up, daemon=True).start()
    try:
        m = asyncio.run(main(job, target))
    except BaseException as e:  # noqa: BLE001 - reported, then exit 1
        print(f"py-sdk: {e!r}", file=sys.stderr)
        sys.exit(1)
    print("RESULT " + json.dumps(m), flush=True)
