"""Outbound connections under the operator's control: MCP server URLs are refused at start (a typed
error in Python, a 422 over HTTP) when they hold credentials or point at private, loopback or
link-local addresses no ``NOETA_MCP_URLS`` pattern names, and refused again on the worker.

No traffic goes to 10.x or 169.254.x: a refused start opens nothing, and the accepted ones are
checked by building the task's input only (the real connection test uses 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options, build_task_input
from noeta.errors import McpUrlNotAllowedError
from noeta.http import create_app
from noeta.mcp.connections import McpConnections
from noeta.mcp.outbound import UrlPolicy
from noeta.protocols.mcp import McpServerConfig
from tests.support.mcp_server import running_http_server

REFUSED = [
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://10.0.0.1/mcp", "private address"),
    ("https://user:pw@mcp.example.com/mcp", "holds credentials"),
    ("http://127.0.0.1:9/mcp", "loopback"),
    ("http://[::ffff:10.0.0.1]/mcp", "private address"),
    ("http://localhost:9/mcp", "loopback"),
]


def task_input(url: str):
    return build_task_input(Options(mcp_servers={"s": {"type": "http", "url": url}}), "go", provider_name="fake")


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_a_url_is_refused_at_start_with_a_typed_error(monkeypatch, url: str, why: str):
    monkeypatch.delenv("NOETA_MCP_URLS", raising=False)  # the default: public addresses only
    with pytest.raises(McpUrlNotAllowedError) as raised:
        task_input(url)
    assert why in str(raised.value)
    assert "pw" not in str(raised.value) and "user:" not in str(raised.value)
    assert "pw" not in raised.value.url


@pytest.mark.parametrize("url", [u for u, why in REFUSED if "credentials" not in why])
def test_the_same_url_on_the_allow_list_is_accepted(monkeypatch, url: str):
    host = url.split("://")[1].split("/")[0]
    monkeypatch.setenv("NOETA_MCP_URLS", f"https://mcp.example.com/*, http://{host}/*")
    assert task_input(url).mcp_servers["s"].url == url


def test_credentials_stay_refused_whatever_the_allow_list(monkeypatch):
    monkeypatch.setenv("NOETA_MCP_URLS", "https://*, https://mcp.example.com/*")
    with pytest.raises(McpUrlNotAllowedError) as raised:
        Options(mcp_servers={"s": {"type": "http", "url": "https://user:pw@mcp.example.com/mcp"}})
    assert "***@mcp.example.com" in str(raised.value) and "pw" not in str(raised.value)


def test_a_wildcard_never_opens_a_private_address_and_a_list_is_strict():
    policy = UrlPolicy(["https://*", "http://*.corp.example:8080/mcp*"])
    policy.check("s", "https://mcp.example.com/mcp")
    policy.check("s", "http://tickets.corp.example:8080/mcp")
    for url in ("https://10.1.2.3/mcp", "http://169.254.169.254/", "http://tickets.corp.example:8080/other",
                "http://mcp.example.com/mcp", "http://evil.example/x.corp.example:8080/mcp"):
        with pytest.raises(McpUrlNotAllowedError):
            policy.check("s", url)
    # a name that resolves into a private range is refused like the address itself (the worker)
    with pytest.raises(McpUrlNotAllowedError, match="resolves to 10.0.0.7"):
        policy.check("s", "https://mcp.example.com/mcp", ["10.0.0.7"])


def test_a_malformed_pattern_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("NOETA_MCP_URLS", "ftp://x")
    with pytest.raises(McpUrlNotAllowedError, match="NOETA_MCP_URLS"):
        UrlPolicy.from_env()


async def test_the_http_api_answers_422_and_starts_nothing(client: AsyncClient, monkeypatch):
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client)), base_url="http://127.0.0.1", timeout=60)
    monkeypatch.delenv("NOETA_MCP_URLS", raising=False)
    for url, why in REFUSED:
        body = {"goal": "go", "task_id": f"refused-{abs(hash(url))}", "options": {"mcp_servers": {"s": {"type": "http", "url": url}}}}
        response = await http.post("/tasks", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "McpUrlNotAllowedError"
        assert why in response.json()["message"] and "pw" not in response.text
        assert (await http.get(f"/tasks/{body['task_id']}")).status_code == 404
    await http.aclose()


async def test_the_worker_refuses_too_before_connecting():
    """A task input that skipped the client's check (another client, an older version) meets the
    same rule on the worker: nothing listening on the refused address is contacted."""
    accepted: list[int] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def accept() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(1)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    connections = McpConnections(urls=UrlPolicy(None))
    try:
        with pytest.raises(McpUrlNotAllowedError, match="loopback"):
            await connections.list_tools("s", McpServerConfig(type="http", url=f"http://127.0.0.1:{port}/mcp"))
        await asyncio.sleep(0.1)
        assert accepted == []
    finally:
        server.close()
        await connections.aclose()


async def test_the_worker_connects_where_the_list_allows():
    with running_http_server() as url:
        connections = McpConnections(urls=UrlPolicy(["http://127.0.0.1:*"]))
        try:
            tools = await connections.list_tools("s", McpServerConfig(type="http", url=url))
            assert "echo" in {t.name for t in tools}
        finally:
            await connections.aclose()
