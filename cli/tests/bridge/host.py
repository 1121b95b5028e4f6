"""A host built on the Python SDK's ClientSession, in front of `mcpwire
bridge`: over stdio (it starts the bridge) or Streamable HTTP; it declares
roots and answers roots/list, lists the tools and runs the steps it is
given, then prints what it saw as one JSON line.

usage: python host.py '<spec JSON>'
  spec: {command, args} or {url}; steps: [{call, args?, progress?}]
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    spec = json.loads(sys.argv[1])
    roots_asked = 0

    async def list_roots(_context):
        nonlocal roots_asked
        roots_asked += 1
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///tmp/bridge-root", name="bridge-root")]
        )

    async with AsyncExitStack() as stack:
        if "url" in spec:
            streams = await stack.enter_async_context(streamable_http_client(spec["url"]))
        else:
            params = StdioServerParameters(command=spec["command"], args=spec["args"])
            streams = await stack.enter_async_context(stdio_client(params))
        read, write = streams[0], streams[1]
        session = await stack.enter_async_context(
            ClientSession(read, write, list_roots_callback=list_roots)
        )
        init = await session.initialize()
        out = {
            "server": init.server_info.model_dump() if hasattr(init, "server_info") else None,
            "tools": [t.name for t in (await session.list_tools()).tools],
            "steps": [],
        }
        for step in spec.get("steps", []):
            progress = 0

            async def on_progress(_p, _t, _m):
                nonlocal progress
                progress += 1

            try:
                result = await session.call_tool(
                    step["call"],
                    step.get("args", {}),
                    progress_callback=on_progress if step.get("progress") else None,
                )
                out["steps"].append({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True), "progress": progress})
            except Exception as e:  # noqa: BLE001 - the error is the result
                code = getattr(getattr(e, "error", None), "code", None)
                out["steps"].append({"error": {"code": code, "message": str(e)}})
        out["rootsAsked"] = roots_asked
        print(json.dumps(out), flush=True)


asyncio.run(main())
