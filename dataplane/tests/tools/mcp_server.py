"""A real MCP server (the official Python SDK, Streamable HTTP transport) for Switchboard's
tool tests. Usage: mcp_server.py, with a listening TCP socket as its standard input (the test
binds it, so no other process can take the port between choosing it and serving on it).
Serves http://<that address>/mcp."""

import asyncio
import socket

import uvicorn

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("switchboard-test")


@app.tool()
async def lookup_account(account: str) -> dict:
    """Looks up an account's holder and balance."""
    return {"account": account, "holder": "Ada Lovelace", "balance": 1234.5}


@app.tool()
async def slow_report(steps: int, ctx: Context) -> str:
    """Builds a report in steps, reporting progress after each."""
    for i in range(steps):
        await asyncio.sleep(0.05)
        await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
    return f"report done after {steps} steps"


@app.tool()
async def broken(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"broken: {reason}")


@app.tool()
async def sleepy(seconds: float) -> str:
    """Answers after a while."""
    await asyncio.sleep(seconds)
    return "awake"


@app.tool()
async def whoami(ctx: Context) -> str:
    """Says which Authorization the request carried (a test of secret headers)."""
    request = ctx.request_context.request
    return request.headers.get("authorization", "") if request is not None else ""


@app.tool()
async def caller(ctx: Context) -> str:
    """Says which X-Switchboard-Identity assertion the request carried (the identity tests)."""
    request = ctx.request_context.request
    return request.headers.get("x-switchboard-identity", "") if request is not None else ""


@app.tool()
async def traceparent(ctx: Context) -> str:
    """Says which W3C traceparent the request carried (the traces tests)."""
    request = ctx.request_context.request
    return request.headers.get("traceparent", "") if request is not None else ""


async def serve() -> None:
    listener = socket.socket(fileno=0)
    host = listener.getsockname()[0]
    config = uvicorn.Config(app.streamable_http_app(host=host), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listener])


asyncio.run(serve())
