"""Remote MCP servers that need authorization (the MCP authorization spec, OAuth 2.1), against a
real authorization server and a real MCP server it protects (tests/support/oauth_server.py).

Workers discover the authorization server from the MCP server's 401, get tokens as a machine
(client credentials) or use a user's login (authorization code + PKCE), keep them sealed in the
token store, refresh them when the server says they expired, and fail with McpAuthError naming
the server when they are revoked. No token reaches history, events or logs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError, EncryptionKeyError, McpAuthError, McpServerError
from noeta.mcp.config import parse_server
from noeta.mcp.connections import McpConnections
from noeta.mcp.login import login
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.keys import parse_keys
from noeta.worker import Registry, build_worker
from tests.support.oauth_server import ProtectedServer, running_protected_server
from tests.support.scripts import call, say

import noeta

KEYS = parse_keys([f"k1:{base64.b64encode(b'k' * 32).decode()}"])


@pytest.fixture
def protected():
    with running_protected_server() as server:
        server.state.add_client("machine-1", "machine-secret-value")
        yield server


@pytest.fixture
def store(tmp_path: Path) -> McpTokenStore:
    return McpTokenStore(tmp_path / "tokens", KEYS)


def machine(url: str, **auth: str) -> dict:
    return {"type": "http", "url": url, "auth": {"client_id": "machine-1", "client_secret": "${MCP_CRM_SECRET}", **auth}}


ENVIRON = {"MCP_CRM_SECRET": "machine-secret-value"}


async def headless_browser(url: str) -> None:
    """What a browser does with an authorization server that approves at once: follow the redirects."""
    async with httpx.AsyncClient(follow_redirects=True) as http:
        (await http.get(url)).raise_for_status()


def test_auth_configuration_is_checked_and_secrets_must_be_references():
    with pytest.raises(ConfigurationError, match="client_secret.*looks like a credential"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"client_id": "a", "client_secret": "literal-secret"}})
    with pytest.raises(ConfigurationError, match=r"unknown key\(s\): password"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"password": "${MCP_P}"}})
    with pytest.raises(ConfigurationError, match="needs a client_id"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"client_secret": "${MCP_S}"}})
    with pytest.raises(ConfigurationError, match="grant must be one of"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"grant": "password"}})
    with pytest.raises(ConfigurationError, match="private_key_jwt is supported for the client_credentials grant only"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp",
                             "auth": {"grant": "authorization_code", "private_key": "${MCP_KEY}"}})
    with pytest.raises(ConfigurationError, match=r"\$\{HOME\} cannot be referenced"):
        parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"client_id": "${HOME}", "client_secret": "${MCP_S}"}})
    config = parse_server("crm", {"type": "http", "url": "https://x/mcp", "auth": {"grant": "authorization_code"}})
    assert config.auth is not None and config.auth.client_id is None  # registered dynamically at login


async def test_errors_name_the_server_and_what_to_do(protected: ProtectedServer, store: McpTokenStore):
    connections = McpConnections(environ=ENVIRON, tokens=store)
    try:
        with pytest.raises(McpAuthError) as refused:
            await connections.list_tools("crm", parse_server("crm", {"type": "http", "url": protected.url}))
        err = refused.value
        assert (err.alias, err.url, err.status) == ("crm", protected.url, 401)
        assert "'auth' entry" in str(err) and "ExceptionGroup" not in str(err)

        wrong = machine(protected.url)
        with pytest.raises(McpAuthError, match="'crm'") as bad_secret:
            await McpConnections(environ={"MCP_CRM_SECRET": "not-the-secret"}, tokens=store).list_tools("crm", parse_server("crm", wrong))
        assert protected.url in str(bad_secret.value) and "check the client's id, secret" in str(bad_secret.value)

        gone = f"http://127.0.0.1:{_closed_port()}/mcp"
        with pytest.raises(McpServerError) as unreachable:
            await connections.list_tools("gone", parse_server("gone", {"type": "http", "url": gone}))
        assert type(unreachable.value) is McpServerError
        assert f"cannot reach MCP server 'gone' ({gone})" in str(unreachable.value)
        assert "ExceptionGroup" not in str(unreachable.value) and "TaskGroup" not in str(unreachable.value)
        assert protected.state.grants == []  # nothing was issued to anyone
    finally:
        await connections.aclose()


def _closed_port() -> int:
    from tests.support.mcp_server import free_port

    return free_port()


async def test_client_credentials_identity_and_a_sealed_store(protected: ProtectedServer, store: McpTokenStore):
    connections = McpConnections(environ=ENVIRON, tokens=store)
    config = parse_server("crm", machine(protected.url))
    try:
        result = await connections.call_tool("crm", config, "whoami", {}, None)
        assert result.content[0].text == f"noeta {noeta.__version__}"  # not the SDK's default "mcp 0.1.0"
        assert protected.state.grants == ["client_credentials"]
    finally:
        await connections.aclose()
    [record] = list(store.directory.iterdir())
    raw = record.read_text()
    assert protected.state.issued and all(token not in raw for token in protected.state.issued)
    assert "machine-secret-value" not in raw
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    # Another worker with the keys uses the stored token: no new token request.
    again = McpConnections(environ=ENVIRON, tokens=McpTokenStore(store.directory, KEYS))
    try:
        assert (await again.call_tool("crm", config, "add", {"a": 1, "b": 2}, None)).content[0].text == "3"
    finally:
        await again.aclose()
    assert protected.state.grants == ["client_credentials"]
    # A worker without the keys cannot read the record, and says so.
    with pytest.raises(EncryptionKeyError, match="NOETA_ENCRYPTION_KEYS"):
        McpTokenStore(store.directory).load(record.stem)


def results(request: LLMRequest) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_a_login_is_refreshed_mid_task_and_a_revoked_one_is_an_auth_error(
    client: AsyncClient, content_store, task_queue, protected: ProtectedServer, store: McpTokenStore, caplog
):
    caplog.set_level(logging.DEBUG)
    server = {"type": "http", "url": protected.url, "auth": {"grant": "authorization_code"}}
    # The operator's one-time login: dynamic registration, PKCE, tokens into the sealed store.
    tools = await login("crm", parse_server("crm", server), store, headless_browser)
    assert "whoami" in tools
    assert protected.state.grants == ["authorization_code"]

    def respond(request: LLMRequest) -> LLMResponse:
        done = results(request)
        if len(done) == 0:
            return call(("c1", "mcp__crm__add", {"a": 2, "b": 40}))
        if len(done) == 1:
            protected.state.expire_access_tokens()  # expires while the task runs
            return call(("c2", "mcp__crm__echo", {"text": "after expiry"}))
        if len(done) == 2:
            protected.state.revoke_all()  # the user withdrew the grant
            return call(("c3", "mcp__crm__echo", {"text": "after revocation"}))
        return say(json.dumps({b.call_id: [b.success, b.output] for b in done}, sort_keys=True))

    provider = FakeLLMProvider(responder=respond)
    registry = Registry.of(providers=[provider], content_store=content_store)
    registry.mcp_connections = McpConnections(tokens=store)
    options = Options(provider=provider, mcp_servers={"crm": server}, tool_retries=2)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("go", options, task_queue=task_queue)
        result = await client.result(task_id)
    answer = json.loads(result.answer)
    assert answer["c1"] == [True, "42"]
    assert answer["c2"] == [True, "after expiry"]  # refreshed, the call did not fail
    assert protected.state.grants == ["authorization_code", "refresh_token"]
    assert answer["c3"][0] is False and "run `noeta mcp login crm" in answer["c3"][1]

    events = await client.events(task_id)
    [failed] = [e.payload for e in events if e.type == "ToolCallFailed"]
    # Not retried (tool_retries=2): the same login would be refused again.
    assert (failed.call_id, failed.error_type, failed.attempt) == ("c3", "McpAuthError", 1)
    assert f"MCP server 'crm' ({protected.url}) refused the stored token (HTTP 401)" in failed.error
    history = b"".join(e.SerializeToString() for e in await client.history(task_id))
    shown = json.dumps([str(e.payload) for e in events]) + caplog.text
    issued = protected.state.issued
    assert len(issued) == 4  # the login's access and refresh tokens, and the refreshed pair
    assert not [t for t in issued if t.encode() in history or t in shown]


FOLLOW_REDIRECTS = "import sys, httpx; httpx.get(sys.argv[1], follow_redirects=True).raise_for_status()"


@pytest.mark.server
async def test_noeta_mcp_login_stores_what_workers_use(protected: ProtectedServer, tmp_path: Path):
    browser = tmp_path / "browser.py"
    browser.write_text(FOLLOW_REDIRECTS)
    key = base64.b64encode(b"k" * 32).decode()
    env = {
        **os.environ, "BROWSER": f"{sys.executable} {browser} %s", "NOETA_MCP_TOKENS_DIR": str(tmp_path / "tokens"),
        "NOETA_ENCRYPTION_KEYS": f"k1:{key}", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "noeta.cli", "mcp", "login", "crm", "--url", protected.url],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"logged in to 'crm' ({protected.url}); its tools: add, echo" in done.stdout
    assert protected.state.grants == ["authorization_code"]
    [record] = (tmp_path / "tokens").iterdir()
    assert not [t for t in protected.state.issued if t in record.read_text()]
    # A worker with the same store and keys uses the login: no new authorization.
    store = McpTokenStore(tmp_path / "tokens", KEYS)
    connections = McpConnections(tokens=store)
    server = parse_server("crm", {"type": "http", "url": protected.url, "auth": {"grant": "authorization_code"}})
    try:
        assert (await connections.call_tool("crm", server, "echo", {"text": "hi"}, None)).content[0].text == "hi"
    finally:
        await connections.aclose()
    assert protected.state.grants == ["authorization_code"]
    # Without a login, a worker says how to get one.
    other = parse_server("other", {"type": "http", "url": protected.url, "auth": {"grant": "authorization_code", "client_id": "x"}})
    with pytest.raises(McpAuthError, match="run `noeta mcp login other --url"):
        await McpConnections(tokens=store).list_tools("other", other)


def test_an_issuer_mismatch_names_both_issuers_and_what_to_change():
    # RFC 8414 section 3.3: metadata naming another issuer than the one it was discovered as is not used.
    from mcp.client.auth import OAuthFlowError

    from noeta.mcp.failures import explain

    config = parse_server("tenant", {"type": "http", "url": "https://mcp.example/mcp", "auth": {"grant": "authorization_code"}})
    err = explain("tenant", config, OAuthFlowError(
        "Authorization server metadata issuer mismatch: https://auth.example/ != https://auth.example/tenant1"
    ))
    assert isinstance(err, McpAuthError)
    text = str(err)
    assert "'https://auth.example/'" in text and "'https://auth.example/tenant1'" in text
    assert "RFC 8414" in text and "authorization_servers" in text and "publish 'https://auth.example/tenant1'" in text


def test_an_https_client_id_is_a_client_id_metadata_document(store: McpTokenStore):
    from noeta.mcp.oauth import build_auth

    document = "https://noeta.example/client-metadata.json"
    config = parse_server("cimd", {"type": "http", "url": "https://mcp.example/mcp", "auth": {"grant": "authorization_code", "client_id": document}})
    provider = build_auth("cimd", config, store)
    assert provider.context.client_metadata_url == document
    assert provider._fixed_client is None  # registered by its document, not as a pre-registered id
