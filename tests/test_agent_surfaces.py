"""Versioned agents on every surface: ``client.start(goal, agent=...)`` (async and sync clients,
catalog given or from NOETA_AGENTS), the CLI (``noeta start/run --agent``, ``noeta tasks``,
``noeta versions``, ``noeta replay --agent --under``; its tasks run on a ``noeta worker`` process,
``noeta run`` is a process of its own), the HTTP API (start body, OpenAPI, listings)
and the console (its start form picks an agent, the task shows its version). Each task records
its agent version in its events, its metadata and its Temporal UI title."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import httpx
import pytest

from noeta.cli.render import task_line
from noeta.cli.parser import build
from noeta.client.agents import Agents, agent_of, with_settings
from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.host import HostConfig
from noeta.client.options import Options
from noeta.client.version_report import VersionUse
from noeta.client.visibility import TaskSummary
from noeta.errors import ConfigurationError
from noeta.http import create_app
from noeta.sdk import Client
from tests.support.agents import agents, provider
from tests.support.asgi import serving
from tests.support.processes import start_worker
from tests.support.waiting import eventually
from tests.test_cli_commands import ROOT, _status, cli_env, noeta, one_error_line  # noqa: F401 (the cli_env fixture)

CATALOG = "tests.support.agents:agents"


# -- fast ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_the_setting_the_flags_and_what_a_task_line_shows():
    assert Settings(agents=CATALOG).agents == CATALOG
    with pytest.raises(ConfigurationError, match="NOETA_AGENTS"):
        Settings(agents="not a path")
    args = build().parse_args(["start", "ticket", "--agent", "triage@2", "--agents", CATALOG])
    assert (args.agent, args.agents) == ("triage@2", CATALOG)
    args = build().parse_args(["replay", "--agent", "triage@1", "--under", "triage@2", "--last", "5"])
    assert (args.tasks, args.agent, args.under, args.last) == ([], "triage@1", "triage@2", 5)
    assert build().parse_args(["versions", "--json"]).json
    line = task_line(TaskSummary("t1", "running", "g", None, 0, 0, 0, None, agent="triage@2", worker_version="d:b"))
    assert "agent triage@2" in line and "worker d:b" in line
    assert agent_of({"agent": "triage@2"}) == ("triage", 2) and agent_of({}) is None
    assert VersionUse("agent", "triage@1", 0).retirable
    assert not VersionUse("agent", "triage@2", 0, "current").retirable and not VersionUse("worker", "d:a", 1).retirable


@pytest.mark.fast
def test_a_tasks_own_settings_go_over_its_agent_versions():
    base = agents.get("triage@1").options
    mine = with_settings(base, Options(max_turns=3, metadata={"ticket": "42"}))
    assert (mine.system_prompt, mine.provider, mine.max_turns) == (base.system_prompt, provider, 3)
    assert mine.metadata == {"ticket": "42"}
    assert with_settings(base, None) is base


# -- against the dev server --------------------------------------------------------------------------------


@pytest.fixture
async def agent_client(settings, content_store):
    """A client whose catalog comes from the NOETA_AGENTS setting."""
    client = await AsyncClient.connect(HostConfig(settings=settings.model_copy(update={"agents": CATALOG}),
                                                  content_store=content_store))
    yield client
    await client.close()


async def created(client: AsyncClient, task_id: str):
    [event] = [e.payload for e in await client.events(task_id) if e.type == "TaskCreated"]
    return event


@pytest.mark.server
async def test_the_client_starts_an_agent_by_name_and_the_task_records_its_version(
    agent_client: AsyncClient, client: AsyncClient, serve, task_queue, settings, content_store
):
    async with serve(providers=[provider]):
        v1 = await agent_client.start("ticket 1", agent="triage@1", task_queue=task_queue)
        v2 = await agent_client.start("ticket 2", agent="triage", task_queue=task_queue)  # current: the highest
        own = await agent_client.start("ticket 3", Options(max_turns=4), agent="triage@1", task_queue=task_queue)
        assert (await agent_client.result(v1)).answer == "a thorough answer to ticket 1"
        assert (await agent_client.result(v2)).answer == "short."
        assert (await agent_client.result(own)).answer == "a thorough answer to ticket 3"
        for task_id, name, version in ((v1, "triage", 1), (v2, "triage", 2)):
            event = await created(agent_client, task_id)
            assert (event.agent, event.agent_version) == (name, version)
        assert (await created(agent_client, own)).max_turns == 4
        description = await client.temporal.get_workflow_handle(v2).describe()
        assert await description.static_summary() == "triage@2 · ticket 2"  # the Temporal UI's title
        assert "**agent** triage@2" in (await description.static_details() or "")
        assert (await client.describe(v1)).agent == "triage@1"

        async def listed() -> bool:
            found = {t.task_id: t.agent for t in await client.list_tasks(metadata={"agent": "triage@1"}, limit=100)}
            return found.get(v1) == "triage@1" and found.get(own) == "triage@1"

        await eventually(listed, timeout=60)

        with pytest.raises(ConfigurationError, match="no version '9'"):
            await agent_client.start("x", agent="triage@9", task_queue=task_queue)
        with pytest.raises(ConfigurationError, match="no agent 'nobody'"):
            await agent_client.start("x", agent="nobody", task_queue=task_queue)
        with pytest.raises(ConfigurationError, match="no agent catalog"):
            await client.start("x", agent="triage", task_queue=task_queue)  # a client without one

        # A catalog given to the client, and the synchronous client (NOETA_AGENTS through its host).
        given = AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue, agents=Agents())
        with pytest.raises(ConfigurationError, match="no agent 'triage'"):
            await given.start("x", agent="triage")
        sync = await asyncio.to_thread(
            Client, HostConfig(settings=settings.model_copy(update={"agents": CATALOG}), content_store=content_store)
        )
        try:
            assert sync.agents is not None and sync.agents.names() == {"triage": [1, 2]}
            task_id = await asyncio.to_thread(sync.start, "ticket 4", agent="triage@2", task_queue=task_queue)
            assert (await client.result(task_id)).answer == "short."
            assert (await created(client, task_id)).agent_version == 2
            fork = await asyncio.to_thread(sync.fork, v1, at_turn=1, agent="triage@2")
            assert (await client.result(fork)).answer == "short."
            assert (await client.describe(fork)).agent == "triage@2"
        finally:
            await asyncio.to_thread(sync.close)


async def closed_and_listed(client: AsyncClient, task_ids: list[str]) -> None:
    """Wait until visibility lists each task as closed (the replay gate asks it for them)."""

    async def listed() -> bool:
        query = " OR ".join(f"WorkflowId = '{t}'" for t in task_ids)
        closed = [w.id async for w in client.temporal.list_workflows(f"({query}) AND ExecutionStatus != 'Running'")]
        return set(task_ids) <= set(closed)

    await eventually(listed, timeout=60)


@pytest.fixture
def agent_worker(cli_env, task_queue):  # noqa: F811
    """A ``noeta worker`` process serving the catalog's provider on the test's queue."""
    proc = start_worker(cli_env, task_queue, "tests.support.agents:registry")
    yield proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


@pytest.mark.server
async def test_the_cli_starts_lists_counts_and_gates_agent_versions(
    cli_env, agent_worker, monkeypatch, capsys, client: AsyncClient, task_queue  # noqa: F811
):
    monkeypatch.setenv("NOETA_AGENTS", CATALOG)
    started = []
    for i in range(2):
        code, out, err = await noeta(capsys, "start", f"ticket {i}", "--agent", "triage@1", "--queue", task_queue)
        assert (code, err) == (0, ""), err
        started.append(out.strip())
    code, out, err = await noeta(capsys, "start", "open ticket", "--agent", "triage", "--keep-open", "--queue", task_queue)
    assert (code, err) == (0, "")
    waiting = out.strip()
    for task_id in started:
        assert (await client.result(task_id)).answer.startswith("a thorough answer")
    await eventually(lambda: _status(client, waiting, "idle"), timeout=60)  # a keep-open task waits

    async def tasks_line() -> bool:
        code, out, _ = await noeta(capsys, "tasks", "--metadata", "agent=triage@1", "--limit", "100")
        return code == 0 and all(f"{t}" in out for t in started) and "agent triage@1" in out

    await eventually(tasks_line, timeout=60)

    async def versions() -> dict[str, dict]:
        code, out, err = await noeta(capsys, "versions", "--json")
        assert (code, err) == (0, "")
        return {v["version"]: v for v in map(json.loads, out.splitlines()) if v["kind"] == "agent"}

    async def counted() -> bool:
        found = await versions()
        return found["triage@2"]["running"] >= 1 and found["triage@1"]["running"] == 0

    await eventually(counted, timeout=60)
    found = await versions()
    assert found["triage@2"]["routing"] == "current" and not found["triage@2"]["retirable"]
    assert found["triage@1"]["retirable"]
    code, out, _ = await noeta(capsys, "versions")
    assert any(line.startswith("agent") and "triage@1" in line and "may be retired" in line for line in out.splitlines())
    await client.close_task(waiting)

    # The deploy gate: version 1's tasks under version 2 change (exit 1), under version 1 they do not.
    await closed_and_listed(client, started)
    code, out, err = await noeta(capsys, "replay", "--agent", "triage@1", "--under", "triage@2", "--last", "2")
    assert code == 1 and err == "", err
    assert all(t in out for t in started) and "short." in out
    code, out, err = await noeta(capsys, "replay", "--agent", "triage@1", "--under", "triage@1", "--last", "2")
    assert (code, err) == (0, ""), out

    code, _, err = await noeta(capsys, "start", "x", "--agent", "triage@7", "--queue", task_queue)
    assert code == 2 and "agent 'triage' has no version '7'" in one_error_line(err, "ConfigurationError")
    code, _, err = await noeta(capsys, "replay", "--agent", "triage@1")
    assert code == 2 and "--under" in one_error_line(err, "ConfigurationError")
    monkeypatch.delenv("NOETA_AGENTS")
    code, _, err = await noeta(capsys, "start", "x", "--agent", "triage", "--queue", task_queue)
    assert code == 2 and "NOETA_AGENTS" in one_error_line(err, "ConfigurationError")


@pytest.mark.server
def test_noeta_run_serves_an_agent_version_in_process(cli_env):  # noqa: F811 (a process: run handles signals)
    # No registry: the agent version brings its own provider (an object the run serves).
    env = {k: v for k, v in cli_env.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NOETA_MODEL")}
    run = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "run", "ticket 7", "--agent", "triage@1", "--agents", CATALOG, "--no-progress"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "a thorough answer to ticket 7"


@pytest.mark.server
async def test_the_http_api_starts_an_agent_and_shows_its_version(agent_client: AsyncClient, serve, task_queue):
    app = create_app(agent_client, keepalive_seconds=1.0)
    async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as http, serve(providers=[provider]):
        spec = (await http.get("/openapi.json")).json()
        assert "agent" in spec["components"]["schemas"]["StartTask"]["properties"]
        assert "agent" in spec["components"]["schemas"]["TaskOut"]["properties"]
        assert [a["name"] for a in (await http.get("/agents")).json()] == ["triage"]

        answer = await http.post("/tasks", json={"goal": "ticket 5", "agent": "triage@1", "task_queue": task_queue})
        assert answer.status_code == 201, answer.text
        task_id = answer.json()["task_id"]
        assert (await agent_client.result(task_id)).answer == "a thorough answer to ticket 5"
        task = (await http.get(f"/tasks/{task_id}")).json()
        assert task["agent"] == "triage@1"
        forked = await http.post(f"/tasks/{task_id}/fork", json={"at_turn": 1, "agent": "triage@2"})
        assert forked.status_code == 201, forked.text
        fork_id = forked.json()["task_id"]
        assert (await agent_client.result(fork_id)).answer == "short."
        assert (await http.get(f"/tasks/{fork_id}")).json()["agent"] == "triage@2"

        async def listed() -> bool:
            rows = (await http.get("/tasks", params={"metadata": "agent=triage@1", "limit": 100})).json()
            return any(r["task_id"] == task_id and r["agent"] == "triage@1" for r in rows)

        await eventually(listed, timeout=60)
        refused = await http.post("/tasks", json={"goal": "x", "agent": "triage@3", "task_queue": task_queue})
        assert refused.status_code == 422
        assert refused.json()["error"] == "ConfigurationError" and "no version '3'" in refused.json()["message"]
