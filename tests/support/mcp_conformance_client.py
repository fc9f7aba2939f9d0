"""The client program the MCP conformance suite runs: ``python -m tests.support.mcp_conformance_client URL``.

It runs a real Noeta task against the scenario's server: a worker of this process connects to the
Temporal cluster named by ``NOETA_CONFORMANCE_TEMPORAL`` (``host:port``), ``prepare_task`` lists
the server's tools, and a scripted model calls each tool once (arguments made from its schema)
before it answers. The server's configuration comes from the scenario (``MCP_CONFORMANCE_SCENARIO``)
and its context (``MCP_CONFORMANCE_CONTEXT``, JSON):

- ``auth/client-credentials-*``: the ``client_credentials`` grant with the context's client (a
  secret, or a private key for ``private_key_jwt``);
- other ``auth/*`` scenarios: a user's login first (``noeta.mcp.login`` with a browser that
  follows the authorization server's redirects, as a real one would when approval needs no
  click), then the task with the ``authorization_code`` grant; a pre-registered client when the
  context gives one;
- the rest: no authorization.

A user's login that lacks a scope a call needs (``auth/scope-step-up``) makes the task wait, listed
with its pending approvals as a ``login`` action naming the command to run; the program does what
an operator does with it: logs in again with the scope it names and approves, and the task goes on.

Secrets go to this process's environment as ``MCP_*`` variables and reach the task only as
references. Exits 0 when the task completed, 1 with the error otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.mcp.config import parse_server
from noeta.mcp.connections import McpConnections
from noeta.mcp.login import login
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.login_wait import LoginRequest
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say

ALIAS = "conformance"
#: Where the suite's operator would host this client's metadata document (the id basic-cimd expects).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def server_config(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """The ``mcp_servers`` entry for the scenario (secrets as ``${MCP_*}`` references, set here)."""
    config: dict[str, Any] = {"type": "http", "url": url}
    if not scenario.startswith("auth/"):
        return config
    auth: dict[str, Any] = {}
    if context.get("client_id"):
        auth["client_id"] = context["client_id"]
    elif scenario == "auth/basic-cimd":  # the operator's Client ID Metadata Document, where it is hosted
        auth["client_id"] = CLIENT_METADATA_URL
    if context.get("client_secret"):
        os.environ["MCP_CONFORMANCE_SECRET"] = context["client_secret"]
        auth["client_secret"] = "${MCP_CONFORMANCE_SECRET}"
    if context.get("private_key_pem"):
        os.environ["MCP_CONFORMANCE_KEY"] = context["private_key_pem"]
        auth["private_key"] = "${MCP_CONFORMANCE_KEY}"
        auth["signing_algorithm"] = context.get("signing_algorithm") or "RS256"
    auth["grant"] = "client_credentials" if scenario.startswith("auth/client-credentials") else "authorization_code"
    config["auth"] = auth
    return config


def argument(schema: dict[str, Any]) -> Any:
    """A value of the JSON schema's type."""
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "test")


def respond(request: LLMRequest) -> LLMResponse:
    """Call every tool once, then report what they returned."""
    done = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if done or not request.tools:
        return say(json.dumps({b.call_id: [b.success, b.output] for b in done}))
    calls = []
    for n, tool in enumerate(request.tools):
        schema = tool.get("input_schema") or {}
        props = schema.get("properties") or {}
        args = {name: argument(props[name]) for name in schema.get("required") or [] if name in props}
        calls.append((f"c{n}", tool["name"], args))
    return call(*calls)


async def headless_browser(url: str) -> None:
    """Follow the authorization server's redirects back to the login's loopback address."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as http:
        (await http.get(url)).raise_for_status()


async def answer_waits(client: AsyncClient, task_id: str, config: dict[str, Any], store: McpTokenStore) -> None:
    """The person behind the task: accept each question a server asks with no fields of their
    own, so the schema's defaults answer (the elicitation scenarios), at once, while the worker
    still holds the server's request (the answer goes back on it); for a login that lacks a
    scope, log in again with the scope the wait names, then let the task go on (scope step-up)."""
    answered: set[str] = set()
    while True:
        for request in await client.pending_approvals(task_id):
            action = request.action
            if request.call_id in answered:
                continue
            if action.type == "elicitation":
                answered.add(request.call_id)
                await client.approve(task_id, request.call_id, True, approver="user:conformance", arguments={})
            elif isinstance(action, LoginRequest):
                answered.add(request.call_id)
                again = {**config, "auth": {**config["auth"], "scope": action.scope}}
                await login(ALIAS, parse_server(ALIAS, again), store, headless_browser)
                await client.approve(task_id, request.call_id, True, approver="user:conformance")
        await asyncio.sleep(0.2)


async def run(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    address = os.environ["NOETA_CONFORMANCE_TEMPORAL"]
    home = Path(tempfile.mkdtemp(prefix="noeta-conformance-"))
    store = McpTokenStore(home / "tokens")
    config = server_config(url, scenario, context)
    if config.get("auth", {}).get("grant") == "authorization_code":
        await login(ALIAS, parse_server(ALIAS, config), store, headless_browser)
    provider = FakeLLMProvider(responder=respond)
    content = LocalContentStore(home / "content")
    registry = Registry.of(providers=[provider], content_store=content)
    registry.mcp_connections = McpConnections(tokens=store)
    client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=address, home=home), content_store=content))
    task_queue = f"conformance-{uuid.uuid4().hex[:8]}"
    options = Options(provider=provider, mcp_servers={ALIAS: config}, tool_retries=0)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start(f"conformance scenario {scenario}", options, task_queue=task_queue)
        answering = asyncio.ensure_future(answer_waits(client, task_id, config, store))
        result = await client.result(task_id)
        answering.cancel()
        print(result.answer)
        failed = [e.payload for e in await client.events(task_id) if e.type == "ToolCallFailed"]
        if failed:
            raise RuntimeError(f"{failed[0].error_type}: {failed[0].error}")


def main() -> int:
    try:
        asyncio.run(run(sys.argv[1]))
    except Exception as err:  # noqa: BLE001 (reported to the suite)
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
