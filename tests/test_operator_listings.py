"""Listings that tell the truth: ``noeta approvals`` lists the tasks it can read and names the one
encrypted with a key it lacks; a fork belongs to its source's tenant whichever route made it, and
lists mark it as a fork of its source. Real tasks on the dev server, the CLI in-process, the HTTP
API behind its key guard."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import Options
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from noeta.security.keys import new_key_entry
from noeta.worker import Registry, build_worker
from tests.support.asgi import serving
from tests.support.recorded import cli, count
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_encryption import ring
from tests.test_export_replay import SCRIPT
from tests.test_guards import AmountGuard, wire_money
from tests.test_key_failures import host
from tests.test_tenants import ALICE, BOB, KEYS_FILE, auth


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, settings: Settings, data_dir: Path, task_queue: str) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    monkeypatch.setenv("NOETA_TASK_QUEUE", task_queue)
    monkeypatch.delenv("NOETA_ENCRYPTION_KEYS", raising=False)


def wiring(amount: int) -> FakeLLMProvider:
    return FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": amount}))])


WIRE = Options(provider="FakeLLMProvider", allowed_tools=["wire_money"], guards=["amount"])


async def test_approvals_lists_the_readable_tasks_and_names_the_unreadable_one(
    cli_env, capsys, client: AsyncClient, settings: Settings, tmp_path: Path, task_queue: str
):
    keys = ring(new_key_entry("v1"))
    secure_queue = f"{task_queue}-secure"
    async with await AsyncClient.connect(host(settings, tmp_path / "secure", keys)) as secure:
        # Each task's first model call asks for a wire over the guard's limit: it waits for a human.
        two_wires = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": a})) for a in (2000, 3000)])
        plain_registry = Registry.of(
            tools=[wire_money], providers={"FakeLLMProvider": two_wires}, content_store=client.content_store, guards=[AmountGuard()]
        )
        secure_registry = Registry.of(
            tools=[wire_money], providers={"FakeLLMProvider": wiring(4000)}, content_store=secure.content_store, guards=[AmountGuard()]
        )
        async with build_worker(client.temporal, plain_registry, task_queue), build_worker(secure.temporal, secure_registry, secure_queue):
            plain = [await client.start(f"pay plainly {n}", WIRE, task_queue=task_queue) for n in (1, 2)]
            sealed = await secure.start("pay secretly", WIRE, task_queue=secure_queue)
            ours = {*plain, sealed}

            async def all_waiting() -> bool:
                listed = await client.list_tasks("awaiting_approval", limit=1000)
                return ours <= {t.task_id for t in listed}

            await eventually(all_waiting, timeout=30)
            code, out, err = await cli(capsys, "approvals", "--limit", "1000")
            # The client's own inbox says the same: the readable ones, and which one it could not read.
            inbox = await client.approvals_waiting(1000)
        assert code == 0
        listed = [line for line in out.splitlines() if line.split()[0] in ours]
        assert sorted(line.split()[0] for line in listed) == sorted(plain)
        assert all("wire_money" in line for line in listed)
        [named] = [line for line in err.splitlines() if sealed in line]
        assert named.startswith(f"task {sealed} waits for approval but could not be read here: EncryptionKeyError: ")
        assert "'v1'" in named
        assert {p.task_id for p in inbox} >= set(plain) and sealed not in {p.task_id for p in inbox}
        [unreadable] = [u for u in inbox.unreadable if u.task_id == sealed]
        assert type(unreadable.error).__name__ == "EncryptionKeyError"
        for task_id in ours:
            await (secure if task_id == sealed else client).cancel(task_id)


async def test_a_fork_is_its_sources_tenants_on_the_cli_and_http_routes_and_is_marked(
    cli_env, capsys, client: AsyncClient, serve, task_queue: str, tmp_path: Path
):
    provider = FakeLLMProvider(responses=[*SCRIPT, say("forked on the command line"), say("forked over HTTP")])
    keys = tmp_path / "keys"
    keys.write_text(KEYS_FILE)
    app = create_app(client, guard=GuardConfig(keys_file=keys))
    async with serve(tools=[count], providers=[provider]), serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        source = await client.start(
            "count to three", Options(provider=provider, allowed_tools=[count]), task_queue=task_queue, tenant="acme"
        )
        assert (await client.result(source)).answer == "three counted"
        code, out, _ = await cli(capsys, "fork", source, "--at-turn", "4")
        assert code == 0
        by_cli = out.strip()
        answer = await http.post(f"/tasks/{source}/fork", json={"at_turn": 4}, headers=auth(ALICE))
        assert answer.status_code == 201, answer.text
        by_http = answer.json()["task_id"]
        for fork in (by_cli, by_http):
            await client.result(fork)
            assert (await http.get(f"/tasks/{fork}", headers=auth(ALICE))).status_code == 200
            refused = await http.get(f"/tasks/{fork}", headers=auth(BOB))
            assert (refused.status_code, refused.json()["error"]) == (404, "TaskNotFoundError")

        async def marked() -> bool:
            rows = (await http.get("/tasks", params={"limit": 200}, headers=auth(ALICE))).json()
            forks = {r["task_id"]: r["forked_from"] for r in rows if r["task_id"] in (by_cli, by_http)}
            return forks == {by_cli: source, by_http: source}

        await eventually(marked, timeout=20)
        others = (await http.get("/tasks", params={"limit": 200}, headers=auth(BOB))).json()
        assert not {by_cli, by_http} & {r["task_id"] for r in others}
        code, out, _ = await cli(capsys, "tasks", "--tenant", "acme", "--limit", "200")
        [line] = [line for line in out.splitlines() if line.startswith(by_cli)]
        assert line.endswith(f"fork of {source}")
