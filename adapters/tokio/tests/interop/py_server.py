"""A small MCP server on the Python SDK (`mcp` 2.3.0) for the interop tests.

Usage: py_server.py stdio
       py_server.py http PORT     (Streamable HTTP on 127.0.0.1:PORT/mcp)
       py_server.py mounted PORT  (the same app mounted at /mcp in a Starlette
                                   app, as FastAPI users do: POST /mcp answers
                                   307 Location: http://127.0.0.1:PORT/mcp/)
"""

import sys
import warnings
from typing import Annotated

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve
from mcp_types import ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

# roots and sampling are deprecated in the 2026-07-28 era; still served.
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28.*")

# tools/list may be cached for a minute (SEP-2549: `ttlMs`, 2026-07-28 only).
mcp = MCPServer(
    "mcpwire-interop-py",
    version="1.0.0",
    cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="private")},
)


@mcp.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return f"Echo: {message}"


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, 50 ms apart."""
    for i in range(1, steps + 1):
        await anyio.sleep(0.05)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done after {steps} steps"


@mcp.tool()
async def roots(ctx: Context) -> str:
    """Asks the client for its roots and returns their URIs, one a line."""
    result = await ctx.session.list_roots()
    return "\n".join(str(r.uri) for r in result.roots)


class Person(BaseModel):
    name: str
    age: int = 30


@mcp.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the user (elicitation) for a name and an age."""
    result = await ctx.elicit("Who are you?", schema=Person)
    if result.action == "accept":
        return f"accepted: {result.data.name}, {result.data.age}"
    return result.action


@mcp.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model (sampling) to summarize `text`."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return f"{result.model}: {content.text if isinstance(content, TextContent) else content}"


def ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@mcp.tool()
async def introduce(person: Annotated[Person, Resolve(ask_person)]) -> str:
    """Elicits a person through a resolver: a server request mid-call in
    2025-11-25, an input_required round in 2026-07-28."""
    return f"hello {person.name}, {person.age}"


def client_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
async def where(roots: Annotated[ListRootsResult, Resolve(client_roots)]) -> str:
    """The client's roots through a resolver (either era)."""
    return "\n".join(str(r.uri) for r in roots.roots)


@mcp.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that resource `uri` changed (to `subscriptions/listen`
    streams: 2026-07-28)."""
    await ctx.notify_resource_updated(uri)
    return "touched"


@mcp.resource("interop://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed text."""
    return "Hello from Python"


@mcp.prompt()
def greet(name: str) -> str:
    """A prompt with one argument."""
    return f"Please greet {name} warmly."


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
    elif mode == "http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif mode == "mounted":
        import contextlib

        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Mount

        inner = mcp.streamable_http_app(streamable_http_path="/")

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with inner.router.lifespan_context(app):
                yield

        app = Starlette(routes=[Mount("/mcp", app=inner)], lifespan=lifespan)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        sys.exit(f"unknown mode {mode!r}: expected stdio, http PORT or mounted PORT")
