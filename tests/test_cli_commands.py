"""Every ``noeta`` subcommand's happy path and its user errors: one line on stderr, exit code 2 (a
failed goal 1), never a traceback. Commands run in-process (``noeta.cli.run`` on a thread of its
own) against the test server and an in-process worker; what needs a real process (a closed pipe,
an unreachable cluster, signals, a terminal) runs ``python -m noeta.cli``."""

from __future__ import annotations

import dataclasses
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noeta.cli import parser, run
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.temporal.converter import NoetaPayloadConverter
from noeta.protocols.task import TaskInput
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, runs, wire_money

ROOT = Path(__file__).resolve().parents[1]
PROVIDER = "FakeLLMProvider"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, settings, data_dir: Path, task_queue: str) -> dict[str, str]:
    env = {
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TASK_QUEUE": task_queue,
        "NOETA_INDEXED_METADATA": "customer",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}


async def noeta(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one command run in-process."""
    capsys.readouterr()
    code = await asyncio.to_thread(run, list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def one_error_line(err: str, name: str) -> str:
    assert err.count("\n") == 1 and err.startswith(f"noeta: {name}: "), err
    return err


async def test_start_with_every_task_flag_then_send_result_messages_events(cli_env, capsys, client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 2, "b": 3})), say("five"), say("again five")])
    async with serve(tools=[add], providers=[provider], guards=[AmountGuard()]):
        code, out, err = await noeta(
            capsys, "start", "add two and three", "--tool", "add", "--provider", PROVIDER, "--queue", task_queue,
            "--system", "Be exact.", "--guard", "amount", "--metadata", "customer=acme", "--max-turns", "5",
            "--temperature", "0", "--model", "fake-m", "--keep-open",
        )
        assert (code, err) == (0, "")
        task_id = out.strip()
        [created] = [e.payload for e in await client.events(task_id) if e.type == "TaskCreated"]
        assert (created.provider, created.tools, created.model, created.max_turns) == (PROVIDER, ["add"], "fake-m", 5)
        await eventually(lambda: _status(client, task_id, "idle"))
        request = provider.received_requests[0]
        assert (request.system, request.temperature, [t["name"] for t in request.tools]) == ("Be exact.", 0.0, ["add"])
        assert [e.payload.guard for e in await client.events(task_id) if e.type == "GuardVerdict"][:1] == ["amount"]

        assert await noeta(capsys, "send", task_id, "once more") == (0, "again five\n", "")
        assert (await noeta(capsys, "close", task_id))[:2] == (0, f"task {task_id} closes after its queued goals\n")
        assert await noeta(capsys, "result", task_id) == (0, "again five\n", "")
    code, out, _ = await noeta(capsys, "messages", task_id)
    assert out.splitlines()[:3] == ["user      │ add two and three", 'tool call │ add({"a": 2, "b": 3}) [c1]', "tool ok   │ add: 5"]
    code, out, _ = await noeta(capsys, "events", task_id, "--json")
    envelopes = [json.loads(line) for line in out.splitlines()]
    assert envelopes[0]["type"] == "TaskCreated" and envelopes[-1]["type"] == "TaskCompleted"
    assert envelopes[0]["timestamp"].endswith("+00:00")
    code, out, _ = await noeta(capsys, "events", task_id)
    assert out.splitlines()[0].split()[:2] == ["1", "TaskCreated"]

    async def listed() -> bool:
        return task_id in (await noeta(capsys, "tasks", "--search", "three", "--status", "completed", "--limit", "200"))[1]

    await eventually(listed)
    code, out, _ = await noeta(capsys, "tasks", "--metadata", "customer=acme", "--search", "three", "--json")
    [row] = [json.loads(line) for line in out.splitlines() if task_id in line]
    assert (row["goal"], row["metadata"], row["model"]) == ("add two and three", {"customer": "acme"}, "fake-m")
    assert "add two and three" in (await noeta(capsys, "tasks", "--search", "three"))[1]


async def _status(client: AsyncClient, task_id: str, status: str) -> bool:
    return (await client.describe(task_id)).status == status


async def test_approvals_approve_deny_and_inject(cli_env, capsys, client: AsyncClient, serve, task_queue):
    runs.clear()
    provider = FakeLLMProvider(responses=[
        call(("c1", "wire_money", {"amount": 2500}), ("c2", "wire_money", {"amount": 9000})), say("done"),
    ])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start(
            "pay", Options(provider=PROVIDER, allowed_tools=["wire_money"], guards=["amount"]), task_queue=task_queue
        )

        async def both_waiting() -> bool:
            return len((await noeta(capsys, "approvals", task_id))[1].splitlines()) == 2

        await eventually(both_waiting)
        code, out, _ = await noeta(capsys, "approvals", task_id)
        assert out.splitlines()[0] == f'{task_id}  c1  wire_money({{"amount": 2500}})  [guard amount — wire of 2500 needs a human]'
        await eventually(lambda: _listed_waiting(capsys, task_id))  # the inbox over every task
        assert await noeta(capsys, "inject", task_id, "prefer small wires") == (
            0, f"injected into task {task_id} (the model sees it at its next step)\n", "")
        code, _, err = await noeta(capsys, "approve", task_id, "c9")
        assert code == 2 and "ApprovalNotPendingError" in one_error_line(err, "ApprovalNotPendingError")
        assert await noeta(capsys, "approve", task_id, "c1", "--approver", "ops") == (0, f"approved c1 of task {task_id}\n", "")
        assert await noeta(capsys, "deny", task_id, "c2", "--reason", "too much") == (0, f"refused c2 of task {task_id}\n", "")
        assert (await client.result(task_id)).answer == "done"
    assert runs == [{"amount": 2500}]
    decided = [(e.type, e.payload.approver, e.payload.reason) for e in await client.events(task_id) if e.type.startswith("Approval") and e.type != "ApprovalRequested"]
    assert decided == [("ApprovalGranted", "ops", None), ("ApprovalDenied", _user(), "too much")]
    assert any(m.origin == "system" and "prefer small wires" in m.text for m in provider.received_requests[1].messages)
    assert (await noeta(capsys, "approvals", task_id))[1] == "nothing waits for approval\n"


def _user() -> str:
    import getpass

    return getpass.getuser()


async def _listed_waiting(capsys, task_id: str) -> bool:
    return task_id in (await noeta(capsys, "approvals"))[1]


async def test_cancel_and_errors_for_unknown_and_ended_tasks(cli_env, capsys, client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("over"), say("open")])
    async with serve(providers=[provider]):
        task_id = await client.start("short", Options(provider=PROVIDER), task_queue=task_queue)
        await client.result(task_id)
        waiting = await client.start("wait", Options(provider=PROVIDER), task_queue=task_queue, keep_open=True)
        await eventually(lambda: _status(client, waiting, "idle"))
        assert await noeta(capsys, "cancel", waiting) == (0, f"cancel requested for task {waiting}\n", "")
        await eventually(lambda: _status(client, waiting, "cancelled"))
    for args in (("cancel", "no-such-task"), ("close", "no-such-task"), ("result", "no-such-task"),
                 ("events", "no-such-task"), ("messages", "no-such-task"), ("inject", "no-such-task", "x"),
                 ("approve", "no-such-task", "c1"), ("send", "no-such-task", "more"), ("approvals", "no-such-task")):
        code, out, err = await noeta(capsys, *args)
        assert code == 2 and out == "", args
        assert one_error_line(err, "TaskNotFoundError") == "noeta: TaskNotFoundError: no task 'no-such-task'\n", args
    for args in (("cancel", task_id), ("close", task_id), ("inject", task_id, "late"), ("approve", task_id, "c1"),
                 ("send", task_id, "more")):
        code, _, err = await noeta(capsys, *args)
        assert code == 2 and "has ended" in one_error_line(err, "TaskNotOpenError"), args
    code, _, err = await noeta(capsys, "inject", task_id, "x" * (64 * 1024 + 1))
    assert code == 2 and one_error_line(err, "PayloadTooLargeError")
    code, _, err = await noeta(capsys, "result", waiting)
    assert code == 2 and one_error_line(err, "TaskCancelledError")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["tasks", "--status", "bogus"], "invalid choice: 'bogus'"),
        (["tasks", "--limit", "0"], "must be from 1 to 1000"),
        (["tasks", "--metadata", "novalue"], "expected key=value"),
        (["start", "x", "--max-turns", "0"], "max_turns must be a whole number from 1 to 10000, got 0"),
        (["start", "x", "--temperature", "nan"], "temperature must be a number from 0 to 2, got nan"),
        (["start", "x", "--guard", "a,b"], "repeat the flag for several"),
        (["start", ""], "must not be empty"),
        (["start", "x", "--output-schema", "{not json"], "cannot read the output schema"),
        (["start", "x", "--output-schema", "[1]"], "expected a JSON Schema"),
        (["start", "x", "--output-schema", "missing.json"], "cannot read the output schema"),
        (["run", "x", "--registry", "no_colon"], "expected package.module:attribute"),
        (["serve", "--port", "70000"], "must be from 1 to 65535"),
        (["worker", "--max-activities", "0"], "must be at least 1"),
        (["worker", "--shutdown-grace-seconds", "-5"], "must be a finite number >= 0"),
        (["retention", "--days", "-1"], "must be a finite number >= 0"),
        (["retention"], "the following arguments are required: --days"),
        (["inject", "t", "x", "--origin", "human"], "invalid choice: 'human'"),
        (["approve", "t"], "the following arguments are required: call"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_every_flag_is_checked_before_anything_connects(capsys, args: list[str], says: str):
    with pytest.raises(SystemExit) as exit:
        run(args)
    out, err = capsys.readouterr()
    assert exit.value.code == 2 and out == ""
    assert err.startswith("usage: noeta") and "error: " in err and "Traceback" not in err
    assert says in err


async def test_start_with_an_output_schema(cli_env, capsys, client: AsyncClient, tmp_path: Path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(schema))
    queue = "nobody-polls-" + path.parent.name
    for value, expected in ((str(path), {"json_schema": schema, "model": None}),
                            ("pkg.models:Answer", {"json_schema": {}, "model": "pkg.models:Answer"})):
        code, out, err = await noeta(capsys, "start", "pick n", "--output-schema", value, "--queue", queue)
        assert (code, err) == (0, "")
        handle = client.temporal.get_workflow_handle(out.strip())
        started = (await client.history(out.strip()))[0].workflow_execution_started_event_attributes
        [task] = NoetaPayloadConverter().from_payloads(started.input.payloads, [TaskInput])
        assert dataclasses.asdict(task.output_schema) == expected
        await handle.terminate("test done")
    code, _, err = await noeta(capsys, "start", "x", "--output-schema", '{"type": 7}', "--queue", queue)
    assert code == 2 and "not valid JSON Schema" in one_error_line(err, "ConfigurationError")


def test_help_on_every_command_and_version(capsys):
    top = parser()
    commands = top._subparsers._group_actions[0]  # type: ignore[union-attr]
    listed = {action.dest: action.help for action in commands._choices_actions}
    assert set(listed) == set(commands.choices)
    for name, subparser in commands.choices.items():
        assert listed[name], f"{name} has no help line"
        with pytest.raises(SystemExit) as exit:
            run([name, "--help"])
        assert exit.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: noeta {name}") and subparser.description in " ".join(out.split())
        for action in subparser._actions:
            assert action.help, f"noeta {name} {action.option_strings or action.dest} has no help"
    with pytest.raises(SystemExit) as exit:
        run(["--version"])
    assert exit.value.code == 0 and capsys.readouterr().out.startswith("noeta ")


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeta.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_an_unreachable_cluster_is_one_line(cli_env):
    # NOETA_CONNECT_TIMEOUT_SECONDS: the CLI gives up after 1 s of retrying, not the default 15 s.
    started = time.monotonic()
    result = cli({**cli_env, "TEMPORAL_ADDRESS": "127.0.0.1:1", "NOETA_CONNECT_TIMEOUT_SECONDS": "1"}, "tasks")
    assert time.monotonic() - started < 12
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("noeta: TemporalUnavailableError: cannot connect to Temporal at 127.0.0.1:1")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


async def test_a_closed_pipe_ends_quietly(cli_env, client: AsyncClient, serve, task_queue):
    async with serve(providers=[FakeLLMProvider(responses=[say("piped")])]):
        task_id = await client.start("pipe", Options(provider=PROVIDER), task_queue=task_queue)
        await client.result(task_id)
    # `noeta events T | head -c0`: the reader is gone before the first line is written.
    process = subprocess.Popen([sys.executable, "-m", "noeta.cli", "events", task_id], cwd=ROOT, env=cli_env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = (await asyncio.to_thread(process.communicate, timeout=120))[1].decode()
    assert process.returncode == 1 and "Traceback" not in stderr and stderr == ""


async def test_noeta_send_if_busy_over_the_cli(cli_env, capsys, client: AsyncClient, serve, task_queue):
    from tests.test_busy_goals import Held, _busy_task, answer

    held, provider = Held(), FakeLLMProvider(responder=answer)
    async with serve(tools=[held.tool()], providers=[provider]):
        task_id = await _busy_task(client, task_queue, provider, held)
        code, out, err = await noeta(capsys, "send", task_id, "stop", "--if-busy", "reject")
        assert (code, out) == (2, "") and "working on another goal" in one_error_line(err, "TaskBusyError")
        assert await noeta(capsys, "send", task_id, "account B", "--if-busy", "interrupt") == (0, "answer: account B\n", "")
        await client.close_task(task_id)
        await client.result(task_id)
    assert held.cancelled.is_set()
