"""A FastMCP server with the tasks extension (SEP-2663, `fastmcp-tasks` 4.1.4)
for the interop tests: a real `io.modelcontextprotocol/tasks` server.

Usage: fastmcp_tasks_server.py stdio
       fastmcp_tasks_server.py http PORT   (Streamable HTTP on 127.0.0.1:PORT/mcp)

Run it with the interpreter of `.deps/tasks-venv` (scripts/test installs it);
no environment variables are needed (it sets FASTMCP_* defaults itself).
It speaks 2026-07-28; task tools run as tasks only when a request declares the
extension in `_meta["io.modelcontextprotocol/clientCapabilities"]`, otherwise
inline. On 2025-11-25 (initialize) it answers too, but never runs a task there.
The Docket backend is in-process (`memory://`, no Redis). It exits on SIGTERM,
when its parent dies, and (stdio) when stdin closes.
"""

import os
import signal
import sys
import threading
import time

# Read by fastmcp's settings at import: no banner, no PyPI update check (which
# would go to the network), warnings and errors only on stderr.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")
os.environ.setdefault("FASTMCP_ENABLE_RICH_LOGGING", "false")

from datetime import timedelta  # noqa: E402

import anyio  # noqa: E402
from fastmcp import Context, FastMCP  # noqa: E402
from fastmcp.utilities.tasks import TaskConfig  # noqa: E402
from fastmcp_tasks import TasksExtension  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import (  # noqa: E402
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402

# Task tools tell clients to poll every 100 ms (`pollIntervalMs`; the default
# is 5 s). `optional`: a task when the client opts in, inline otherwise.
TASK = TaskConfig(mode="optional", poll_interval=timedelta(milliseconds=100))

mcp = FastMCP("mcpwire-interop-fastmcp-tasks", version="1.0.0")
# In-process Docket; the worker looks for new work every 10 ms (default 50).
mcp.add_extension(
    TasksExtension(url="memory://", minimum_check_interval=timedelta(milliseconds=10))
)


@mcp.tool(task=TASK)
async def slow_add(a: int, b: int, ctx: Context, seconds: float = 0.5) -> int:
    """Adds a and b after `seconds`, reporting progress in 5 steps (as a task,
    the last message is the task's `statusMessage`)."""
    steps = 5
    for i in range(1, steps + 1):
        await anyio.sleep(seconds / steps)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return a + b


@mcp.tool(task=TASK)
async def failing(seconds: float = 0.2, protocol_error: bool = False) -> str:
    """Raises after `seconds`. A plain exception is a tool error: the task
    completes with an `isError` result. With `protocol_error` it raises a
    JSON-RPC error (code -32000) instead: the task ends `failed` with `error`."""
    await anyio.sleep(seconds)
    if protocol_error:
        raise MCPError(code=-32000, message="failing: deliberate protocol error")
    raise RuntimeError("failing: deliberate failure")


@mcp.tool(task=TASK)
async def ask_name(ctx: Context) -> str | InputRequiredResult:
    """Asks the client for a name (elicitation) and returns `hello <name>`.

    fastmcp-tasks has no imperative `ctx.elicit()` in a task: the tool returns
    an InputRequiredResult (the task goes `input_required`), the client answers
    with `tasks/update`, and the tool runs again with `ctx.input_responses`.
    Inline (no extension) the same tool answers `resultType: "input_required"`.
    """
    rc = ctx.request_context
    if rc is not None and rc.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # 2025-11-25 (handshake era): no InputRequiredResult there; a server
        # request `elicitation/create` mid-call instead (never a task there).
        result = await ctx.elicit("What is your name?", str)
        return f"hello {result.data}" if result.action == "accept" else f"no name ({result.action})"
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        return InputRequiredResult(
            input_requests={
                "name": ElicitRequest(
                    params=ElicitRequestFormParams(
                        message="What is your name?",
                        requested_schema={
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        },
                    )
                )
            }
        )
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return f"hello {answer.content.get('name')}"
    return f"no name ({getattr(answer, 'action', 'unknown')})"


@mcp.tool()
def quick(x: int) -> int:
    """Returns x*2 (never a task)."""
    return x * 2


def _exit_with_parent() -> None:
    """Exit when the parent process dies (the test runner was killed)."""
    # Polls for re-parenting rather than PR_SET_PDEATHSIG: that signal fires
    # when the spawning *thread* exits, and a test runtime's threads come and go.
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _exit_on_sigterm(signum, frame) -> None:
    # Nothing to flush: the task store is in memory.
    os._exit(0)


if __name__ == "__main__":
    _exit_with_parent()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio", show_banner=False)
    elif mode == "http" and len(sys.argv) > 2:
        # uvicorn installs its own SIGTERM handler (graceful shutdown, at most
        # 2 s); the parent watch above still ends the process.
        mcp.run(
            "http",
            show_banner=False,
            host="127.0.0.1",
            port=int(sys.argv[2]),
            path="/mcp",
        )
    else:
        sys.exit(f"unknown mode {sys.argv[1:]!r}: expected stdio or http PORT")
