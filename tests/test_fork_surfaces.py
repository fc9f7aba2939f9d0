"""Forking from the operators' surfaces against real servers: ``noeta fork`` (the CLI against the
test's dev server) and ``POST /tasks/{id}/fork`` (the HTTP API behind its API-key guard)."""

from __future__ import annotations

from pathlib import Path

import httpx

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from noeta.temporal.search_attributes import FORKED_FROM
from tests.support import recorded
from tests.support.asgi import serving
from tests.support.recorded import cli, count
from tests.support.scripts import say
from tests.test_export_replay import run_counting_task

KEY = "fork-key-" + "c3" * 16


async def test_cli_fork(client: AsyncClient, serve, task_queue, settings, data_dir: Path, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    source = await run_counting_task(client, serve, task_queue)
    runs_before = len(recorded.RUNS)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Count less.")
    other = FakeLLMProvider(responses=[say("forked from the command line"), say("forked from a file")])
    async with serve(tools=[count], providers={"other": other}):
        code, out, _ = await cli(
            capsys, "fork", source, "--at-turn", "3", "--provider", "other", "--model", "m-9",
            "--system-prompt", f"@{prompt}",  # on the source's task queue
        )
        assert code == 0
        fork = out.strip()
        assert (await client.result(fork)).answer == "forked from the command line"
        # An export written by `noeta export` forks too.
        code, out, _ = await cli(capsys, "export", source)
        exported = tmp_path / "task.json"
        exported.write_text(out)
        code, out, _ = await cli(capsys, "fork", str(exported), "--at-turn", "2", "--provider", "other", "--queue", task_queue)
        assert code == 0
        assert (await client.result(out.strip())).answer == "forked from a file"
    request, from_file = other.received_requests
    assert (request.system, request.model) == ("Count less.", "m-9")
    assert [str(b.output) for m in from_file.messages for b in m.content if b.type == "tool_result"] == ["counted 1"]
    assert len(recorded.RUNS) == runs_before
    # A turn the task has not recorded: one line naming the range, exit code 2, nothing started.
    code, _, err = await cli(capsys, "fork", source, "--at-turn", "7", "--queue", task_queue)
    assert code == 2 and err.startswith("noeta: TurnNotFoundError: ") and "1..4" in err


async def test_http_fork_needs_the_key_and_starts_the_fork(client: AsyncClient, serve, task_queue):
    source = await run_counting_task(client, serve, task_queue)
    runs_before = len(recorded.RUNS)
    other = FakeLLMProvider(responses=[say("forked over HTTP")])
    app = create_app(client, guard=GuardConfig(api_keys=(KEY,)))
    body = {"at_turn": 2, "options": {"provider": "other"}, "task_queue": task_queue, "task_id": f"{source}-http-fork"}
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        refused = await http.post(f"/tasks/{source}/fork", json=body)
        assert (refused.status_code, refused.json()["error"]) == (401, "Unauthorized")
        auth = {"authorization": f"Bearer {KEY}"}
        async with serve(tools=[count], providers={"other": other}):
            answer = await http.post(f"/tasks/{source}/fork", json=body, headers=auth)
            assert answer.status_code == 201, answer.text
            fork = answer.json()["task_id"]
            assert fork == f"{source}-http-fork"
            assert (await client.result(fork)).answer == "forked over HTTP"
        (request,) = other.received_requests
        assert request.system == "Count carefully."  # the source's, not the options body's default
        assert len(recorded.RUNS) == runs_before
        described = await client.temporal.get_workflow_handle(fork).describe()
        assert described.typed_search_attributes.get(FORKED_FROM) == source
        # Bad input: a turn not recorded, an unknown task, a turn that is not a number.
        missing = await http.post(f"/tasks/{source}/fork", json={"at_turn": 9}, headers=auth)
        assert missing.status_code == 422
        assert missing.json() == {
            "error": "TurnNotFoundError", "message": missing.json()["message"], "task_id": source,
            "first_turn": 1, "last_turn": 4,
        }
        assert "1..4" in missing.json()["message"]
        unknown = await http.post("/tasks/no-such-task-to-fork/fork", json={"at_turn": 1}, headers=auth)
        assert (unknown.status_code, unknown.json()["error"]) == (404, "TaskNotFoundError")
        bad = await http.post(f"/tasks/{source}/fork", json={"at_turn": "2"}, headers=auth)
        assert bad.status_code == 422
