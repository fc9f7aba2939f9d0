"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
tests/conformance/package.json) against Noeta's client: each client scenario below runs
tests/support/mcp_conformance_client.py, which runs a real Noeta task on this suite's Temporal
server against the scenario's MCP server (and authorization server).

Needs Node (Debian's ``nodejs`` and ``npm``); without it the test is skipped, unless
``NOETA_REQUIRE_NODE=1`` (CI) makes that a failure. The suite itself is installed from npm with
``npm ci --prefix tests/conformance`` (the test does it when it is missing, once: parallel test
workers take a file lock, since two ``npm ci`` into one folder fail with "Text file busy").

The suite's other client scenarios are not required here. Run with this program they gave:

- passing: ``auth/scope-from-scopes-supported``, ``auth/scope-omitted-when-undefined``,
  ``auth/scope-retry-limit``, ``auth/token-endpoint-auth-none``, ``auth/resource-mismatch``,
  ``auth/pre-registration``, ``auth/2025-03-26-oauth-metadata-backcompat``,
  ``auth/2025-03-26-oauth-endpoint-fallback``;
- failing: ``auth/metadata-var2`` and
  ``auth/metadata-var3``: the scenario's authorization server at a path, ``/tenant1``, publishes
  metadata whose ``issuer`` is its origin. The MCP authorization spec has clients discover that
  metadata by RFC 8414, whose section 3.3 says: "The "issuer" value returned MUST be identical to
  the authorization server's issuer identifier value into which the well-known URI string was
  inserted to create the URL used to retrieve the metadata. If these values are not identical, the
  data contained in the response MUST NOT be used." Noeta (the SDK's client) therefore stops with
  McpAuthError naming both issuers and what the operators can change.

``elicitation-sep1034-client-defaults`` passes on the request that asked: the scenario's tool
awaits its ``elicitation/create`` on the session of its one ``tools/call`` (an error there is a
FAILURE), the program answers the task's listed question at once as a person would (accept with no
fields of their own, so the schema's defaults answer), and the worker, which holds the server's
request open for ``elicitation_hold_seconds``, returns the answer on it (docs/mcp.md).
``auth/basic-cimd`` passes with the operator's Client ID Metadata Document URL as ``client_id``.
``auth/scope-step-up`` passes without a manual re-run: the user's login lacks the scope the call
needs, the task waits with a ``login`` action naming the command, and the program, as an operator
would, logs in with that scope and approves; the call is made again and completes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noeta.client.embedded import EmbeddedServer
from tests.support.processes import ROOT

SUITE_DIR = ROOT / "tests" / "conformance"
SUITE_BIN = SUITE_DIR / "node_modules" / ".bin" / "conformance"

#: The scenarios the issue requires to pass.
REQUIRED = [
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/scope-from-www-authenticate",
    "auth/scope-step-up",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/basic-cimd",
    "elicitation-sep1034-client-defaults",
]


def _suite() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("NOETA_REQUIRE_NODE") == "1":
            pytest.fail("NOETA_REQUIRE_NODE=1 but node/npm are not installed (apt-get install nodejs npm)")
        pytest.skip("Node is not installed (apt-get install nodejs npm): the MCP conformance suite runs on it")
    with open(SUITE_DIR / ".install.lock", "w") as lock:  # one installer; the others wait, then see it done
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not SUITE_BIN.exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(SUITE_DIR)], check=True, timeout=300)
    return SUITE_BIN


def run_scenario(suite: Path, scenario: str, temporal: EmbeddedServer, out: Path) -> tuple[int, list[dict], str]:
    """Run one client scenario; (exit code, the suite's checks, its output)."""
    env = {**os.environ, "NOETA_CONFORMANCE_TEMPORAL": temporal.address, "PYTHONPATH": str(ROOT)}
    command = f"{sys.executable} -m tests.support.mcp_conformance_client"
    done = subprocess.run(
        [str(suite), "client", "--command", command, "--scenario", scenario, "--timeout", "60000", "-o", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    checks: list[dict] = []
    for found in out.rglob("checks.json"):
        checks = json.loads(found.read_text())
    return done.returncode, checks, done.stdout + done.stderr


@pytest.mark.parametrize("scenario", REQUIRED)
def test_conformance_client_scenario(scenario: str, temporal_server: EmbeddedServer, tmp_path: Path):
    suite = _suite()
    code, checks, output = run_scenario(suite, scenario, temporal_server, tmp_path)
    bad = [(c["id"], c["status"], c.get("description")) for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert checks, output[-3000:]
    assert code == 0 and not bad, f"{bad}\n{output[-3000:]}"
