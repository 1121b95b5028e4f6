"""The interop matrix's Python server: an `echo` tool and one text resource,
written for each Python server library the matrix covers.

Usage: matrix_server.py FLAVOUR stdio
       matrix_server.py FLAVOUR http PORT   (Streamable HTTP on 127.0.0.1:PORT/mcp)

FLAVOUR is the library, and the interpreter must be a venv holding it
(scripts/test installs them into .deps/):
  fastmcp1   the Python SDK 1.x, FastMCP 1 (`mcp.server.fastmcp`; .deps/venv-mcp1)
  mcpserver  the Python SDK 2.x, MCPServer (`mcp.server.mcpserver`; .deps/venv)
  fastmcp    standalone FastMCP, any version (`fastmcp`; .deps/venv-fastmcp2,
             .deps/tasks-venv)

It stops at stdin EOF (stdio), when killed, and after MAX_LIFETIME whatever
happens.
"""

import os
import sys
import threading

# Read by standalone FastMCP's settings at import: no banner, no PyPI update
# check (it would go to the network), warnings and errors only on stderr.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")

MAX_LIFETIME = 300.0
RESOURCE_URI = "memo://interop/greeting"
HOST = "127.0.0.1"


def usage():
    sys.exit("usage: matrix_server.py fastmcp1|mcpserver|fastmcp stdio|http PORT")


def define(server, flavour):
    @server.tool()
    def echo(message: str) -> str:
        """Echoes the message back."""
        return f"Echo: {message}"

    @server.resource(RESOURCE_URI, mime_type="text/plain")
    def greeting() -> str:
        """A greeting."""
        return f"hello from {flavour}"


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[1] == "stdio":
        port = None
    elif len(args) == 3 and args[1] == "http" and args[2].isdigit():
        port = int(args[2])
    else:
        usage()
    flavour = args[0]
    timer = threading.Timer(MAX_LIFETIME, os._exit, (0,))
    timer.daemon = True
    timer.start()

    if flavour == "fastmcp1":
        from mcp.server.fastmcp import FastMCP

        server = FastMCP("mcpwire-matrix", host=HOST, port=port or 8000)
        define(server, flavour)
        server.run(transport="stdio" if port is None else "streamable-http")
    elif flavour == "mcpserver":
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("mcpwire-matrix")
        define(server, flavour)
        if port is None:
            server.run("stdio")
        else:
            server.run("streamable-http", host=HOST, port=port)
    elif flavour == "fastmcp":
        from fastmcp import FastMCP

        server = FastMCP("mcpwire-matrix")
        define(server, flavour)
        if port is None:
            server.run(show_banner=False)
        else:
            server.run(transport="http", host=HOST, port=port, show_banner=False)
    else:
        usage()


if __name__ == "__main__":
    main()
