"""Accountable approvals from the terminal: ``noeta approve --as NAME --arguments JSON`` records the
name (as the CLI's user identity) and the edit, ``noeta events`` shows who answered and the edit,
``noeta audit`` lists who started, injected and edited; a bad ``--arguments`` is a usage error."""

from __future__ import annotations

import getpass
import json

import pytest

from noeta.client.client import AsyncClient
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_cli_commands import PROVIDER, cli_env, noeta  # noqa: F401 (cli_env: a fixture)
from tests.test_guards import AmountGuard, runs, wire_money


async def test_approve_as_with_edited_arguments_events_and_audit(cli_env, capsys, client: AsyncClient, serve, task_queue):  # noqa: F811
    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("done")])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        code, out, _ = await noeta(
            capsys, "start", "pay", "--provider", PROVIDER, "--tool", "wire_money", "--guard", "amount", "--queue", task_queue
        )
        assert code == 0
        task_id = out.strip()
        await eventually(lambda: client.pending_approvals(task_id))
        assert (await noeta(capsys, "inject", task_id, "invoice 7"))[0] == 0
        with pytest.raises(SystemExit) as usage:
            await noeta(capsys, "approve", task_id, "c1", "--arguments", "[900]")
        assert usage.value.code == 2 and "--arguments: must be a JSON object" in capsys.readouterr().err
        assert await noeta(capsys, "approve", task_id, "c1", "--as", "ana", "--arguments", '{"amount": 900}') == (
            0, f"approved c1 of task {task_id} with edited arguments\n", "")
        assert (await client.result(task_id)).answer == "done"
    assert runs == [{"amount": 900}]
    events = (await noeta(capsys, "events", task_id))[1]
    [granted] = [line for line in events.splitlines() if "ApprovalGranted" in line]
    assert '[c1] by ana (user) after ' in granted and '· edited {"amount": 2500} → {"amount": 900}' in granted
    audit = (await noeta(capsys, "audit", task_id))[1].splitlines()
    assert [line.split()[2:5] for line in audit] == [
        ["started", getpass.getuser(), "(user)"], ["injected", getpass.getuser(), "(user)"], ["edited", "ana", "(user)"],
    ]
    assert audit[2].endswith('[c1]  {"amount": 900}') and audit[1].endswith("[system] invoice 7")


async def test_tasks_by_tenant(cli_env, capsys, client: AsyncClient, task_queue):  # noqa: F811
    word = f"tenanted{task_queue[2:]}"
    acme = await client.start(f"goal {word}", tenant="acme", task_queue=task_queue)
    other = await client.start(f"goal {word}", task_queue=task_queue)  # no tenant: the default one

    async def listed(tenant: str) -> list[str]:
        out = (await noeta(capsys, "tasks", "--search", word, "--tenant", tenant, "--json"))[1]
        return [row["task_id"] for row in map(json.loads, out.splitlines())]

    await eventually(lambda: listed("acme"))
    await eventually(lambda: listed("default"))
    assert await listed("acme") == [acme] and await listed("default") == [other] and await listed("globex") == []
    for task_id in (acme, other):
        await client.cancel(task_id)
