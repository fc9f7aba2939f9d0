"""A real MCP server written with the official ``mcp`` SDK (FastMCP), for the remote-MCP tests.

Over stdio: ``python -m tests.support.mcp_server`` (the worker starts it). Over streamable HTTP:
:func:`running_http_server` serves it on 127.0.0.1 from a thread of the test process.

``$MCP_TEST_LOG`` (when set) gets a line ``pid N`` when the server starts and ``start TEXT pid N``
when ``slow_echo`` begins, so a test can kill the server in the middle of a call.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.shared.exceptions import McpError
from mcp.types import SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def build_server(name: str = "noeta-test", port: int = 0, **settings: Any) -> FastMCP:
    """The test tools; ``settings`` go to FastMCP (e.g. ``auth`` and ``token_verifier``)."""
    server = FastMCP(name, host="127.0.0.1", port=port, log_level="WARNING", **settings)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def fail(reason: str) -> str:
        """Always fails with the reason (an isError result)."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    async def slow_echo(text: str, seconds: float) -> str:
        """Wait, then echo the text."""
        _log(f"start {text} pid {os.getpid()}")
        await asyncio.sleep(seconds)
        return f"{text} (pid {os.getpid()})"

    @server.tool()
    def env_digest(name: str) -> str:
        """The first 12 hex digits of sha256 of an environment variable of the server process."""
        value = os.environ.get(name)
        return "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()[:12]

    @server.tool()
    def header_digest(name: str, ctx: Context) -> str:
        """The first 12 hex digits of sha256 of a header of this HTTP request."""
        request = ctx.request_context.request
        value = request.headers.get(name) if request is not None else None
        return "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()[:12]

    return server


class Confirmation(BaseModel):
    """What ``confirm_action`` asks for: a yes/no, and a note with a default (SEP-1034)."""

    confirm: bool
    note: str = "none"


def add_asking_tools(server: FastMCP) -> None:
    """Tools that ask the client back: ``confirm_action`` (an elicitation) and ``summarize`` (a
    sampling request: the client's model writes the summary)."""

    @server.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Have the client's model summarize the text (``sampling/createMessage``); a refusal is
        reported, not raised."""
        _log(f"sampling {text} pid {os.getpid()}")
        try:
            answer = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
                max_tokens=64, system_prompt="You summarize in five words.",
            )
        except McpError as err:
            return f"sampling refused: {err.error.message}"
        said = answer.content.text if isinstance(answer.content, TextContent) else str(answer.content)
        return f"summary by {answer.model}: {said}"

    @server.tool()
    async def confirm_action(action: str, ctx: Context) -> str:
        """Ask the user to confirm the action (an elicitation), then say what they answered."""
        _log(f"asked {action} pid {os.getpid()} request {ctx.request_id}")
        answer = await ctx.elicit(f"Really {action}?", Confirmation)
        _log(f"answered {answer.action} request {ctx.request_id}")
        if answer.action == "accept":
            return f"{action}: confirm={answer.data.confirm} note={answer.data.note}"
        return f"{action}: {answer.action}"



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_http_server(port: int | None = None, asking: bool = False) -> Iterator[str]:
    """The server over streamable HTTP on 127.0.0.1 (``asking``: with :func:`add_asking_tools`);
    yields its MCP endpoint URL."""
    import uvicorn

    port = port or free_port()
    server_ = build_server(port=port)
    if asking:
        add_asking_tools(server_)
    app = server_.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name=f"mcp-http-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the MCP test server did not start on port {port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    _log(f"pid {os.getpid()}")
    build_server().run("stdio")
