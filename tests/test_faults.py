"""Fault injection: a provider that hangs, trickles, resets, answers malformed or oversized bodies
or 429s; tools that hang, reuse call ids or return the wrong type; completions that never reach the
server; bad option values at every entry. Each test asserts the exact outcome: task status, error
type, attempt count, executions per call."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import AttemptsExhaustedError, ConfigurationError
from noeta.http import create_app
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.names import CALL_MODEL, INVOKE_TOOL, WORKFLOW_NAME
from noeta.protocols.task import TaskInput
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.providers.openai import OpenAIProvider
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.config.tuning import WorkerTuning
from noeta.worker import Registry, build_worker
from tests.support.fault_server import FaultServer, running_fault_server
from tests.support.scripts import call, say
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]


def faulty(server: FaultServer, **kwargs) -> OpenAIProvider:
    return OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="faulty", **kwargs)


async def events_of(client: AsyncClient, task_id: str, kind: str) -> list:
    return [e.payload for e in await client.events(task_id) if e.type == kind]


# -- the provider side ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["hang", "trickle"])
async def test_a_model_that_never_finishes_times_out_each_attempt_and_says_so(client, serve, task_queue, fault):
    with running_fault_server(faults=[fault, fault]) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            options = Options(provider=provider, model_timeout_seconds=4, max_retries=1)
            task_id = await client.start("hi", options, task_queue=task_queue)
            with pytest.raises(AttemptsExhaustedError) as info:
                await client.result(task_id)
    assert (info.value.attempts, info.value.last_failure_type) == (2, "provider")
    assert info.value.issues == ["provider 'faulty': no answer within 4 s (model_timeout_seconds)"] * 2
    # Timed-out attempts are recorded by the worker, so the event log shows them.
    retried = await events_of(client, task_id, "ProviderCallRetried")
    assert [(r.attempt, r.error_type) for r in retried] == [(1, "ProviderError")]
    assert len(server.seen) == 2


async def test_a_reset_connection_is_retried(client, serve, task_queue):
    with running_fault_server(faults=["reset"]) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            task_id = await client.start("hi", Options(provider=provider, max_retries=1), task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "ok")
    [retried] = await events_of(client, task_id, "ProviderCallRetried")
    assert (retried.attempt, retried.error_type) == (1, "ProviderError")
    [done] = await events_of(client, task_id, "ProviderCallCompleted")
    assert done.attempt == 2
    assert [s.fault for s in server.seen] == ["reset", "ok"]


async def test_malformed_answers_are_typed_retried_and_never_a_completed_empty_answer(client, serve, task_queue):
    with running_fault_server(faults=["null_message", "oops_tool_calls"]) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            task_id = await client.start("hi", Options(provider=provider, max_retries=1), task_queue=task_queue)
            with pytest.raises(AttemptsExhaustedError) as info:
                await client.result(task_id)
    assert info.value.attempts == 2
    assert info.value.issues == [
        "provider 'faulty': malformed response: choices[0].message is null, expected an object",
        'provider \'faulty\': malformed response: choices[0].message.tool_calls is "oops", expected a list',
    ]
    assert [r.error_type for r in await events_of(client, task_id, "ProviderCallRetried")] == ["ProviderResponseError"]
    [failed] = await events_of(client, task_id, "ProviderCallFailed")
    assert failed.error_type == "ProviderResponseError"


async def test_an_oversized_answer_is_kept_in_the_content_store(client, serve, task_queue, content_store):
    with running_fault_server(faults=["oversized"]) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            task_id = await client.start("hi", Options(provider=provider), task_queue=task_queue)
            result = await client.result(task_id)
    size = 3 * 1024 * 1024
    assert result.status == "completed"
    preview, _, note = result.answer.partition("… ")
    assert preview == "y" * 512
    assert note.startswith(f"[answer of {size} bytes in content store ")
    digest = note.removesuffix("]").rsplit(" ", 1)[1]
    assert content_store.get(digest) == b"y" * size
    assert len(server.seen) == 1


async def test_429_waits_do_not_use_up_retries(client, serve, task_queue):
    with running_fault_server(faults=["429"] * 4) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            task_id = await client.start("hi", Options(provider=provider, max_retries=0), task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "ok")
    retried = await events_of(client, task_id, "ProviderCallRetried")
    assert [(r.attempt, r.retry_after) for r in retried] == [(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)]
    [done] = await events_of(client, task_id, "ProviderCallCompleted")
    assert done.attempt == 5
    assert [s.status for s in server.seen] == [429, 429, 429, 429, 200]


async def test_429_waits_are_bounded_by_rate_limit_wait_seconds(client, serve, task_queue):
    with running_fault_server(faults=["429"] * 5) as server:
        provider = faulty(server)
        async with serve(providers=[provider]):
            options = Options(provider=provider, max_retries=0, rate_limit_wait_seconds=2.5)
            task_id = await client.start("hi", options, task_queue=task_queue)
            with pytest.raises(AttemptsExhaustedError) as info:
                await client.result(task_id)
    # Waited 1 s + 1 s; a third wait would pass 2.5 s.
    assert (info.value.attempts, info.value.last_failure_type) == (3, "rate_limit")
    assert all("HTTP 429" in issue for issue in info.value.issues)
    assert [s.status for s in server.seen] == [429, 429, 429]


async def test_model_timeout_seconds_wins_over_the_adapters_own_timeout(client, serve, task_queue):
    with running_fault_server(faults=[("slow", 2.0)]) as server:
        provider = faulty(server, timeout=1)  # the adapter alone would give up after 1 s
        async with serve(providers=[provider]):
            options = Options(provider=provider, model_timeout_seconds=20, max_retries=0)
            task_id = await client.start("hi", options, task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "ok")
    assert [s.status for s in server.seen] == [200]


# -- bad option values at every entry ------------------------------------------------------------


BAD_OPTIONS = [
    ("model_timeout_seconds", math.nan, "model_timeout_seconds must be a number above 0 to 604800, got nan"),
    ("model_timeout_seconds", math.inf, "model_timeout_seconds must be a number above 0 to 604800, got inf"),
    ("model_timeout_seconds", 1e308, "model_timeout_seconds must be a number above 0 to 604800, got 1e+308"),
    ("tool_timeout_seconds", math.nan, "tool_timeout_seconds must be a number above 0 to 604800, got nan"),
    ("max_retries", 10**12, "max_retries must be a whole number from 0 to 100, got 1000000000000"),
    ("max_turns", 0, "max_turns must be a whole number from 1 to 10000, got 0"),
    ("temperature", math.nan, "temperature must be a number from 0 to 2, got nan"),
    ("rate_limit_wait_seconds", -1, "rate_limit_wait_seconds must be a number from 0 to 86400, got -1"),
    ("store_outage_wait_seconds", 10**6, "store_outage_wait_seconds must be a number from 0 to 86400, got 1000000"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_OPTIONS)
def test_options_refuse_out_of_range_values_with_the_range(name, value, message):
    with pytest.raises(ConfigurationError) as info:
        Options(**{name: value})
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [b for b in BAD_OPTIONS if not (isinstance(b[1], float) and not math.isfinite(b[1]))],  # JSON has no nan/inf
)
async def test_http_refuses_out_of_range_options(client: AsyncClient, name, value, message):
    transport = httpx.ASGITransport(app=create_app(client))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        response = await api.post("/tasks", json={"goal": "x", "options": {name: value}})
    assert response.status_code == 422
    assert response.json() == {"error": "ConfigurationError", "message": message}


def test_cli_refuses_out_of_range_options(settings, tmp_path):
    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "run", "x", "--registry", "tests.support.registry:cli_registry", "--max-turns", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode != 0
    assert "max_turns must be a whole number from 1 to 10000, got 0" in proc.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_timeout_seconds": math.nan}, "model_timeout_seconds must be a number above 0 to 604800, got nan"),
        ({"max_retries": 10**12}, "max_retries must be a whole number from 0 to 100, got 1000000000000"),
        ({"guard_activity": ActivityOptions(heartbeat_seconds=math.nan)},
         "guard_activity.heartbeat_seconds must be a number from 1 to 86400, got nan"),
    ],
)
async def test_the_workflow_fails_a_bad_input_that_slipped_through_instead_of_wedging(
    client: AsyncClient, content_store, task_queue, change, message
):
    # Started with Temporal's own client, past Options: the workflow must still fail the task,
    # typed, rather than fail its workflow tasks forever. (No fail-fast worker setting here.)
    registry = Registry.of(providers={"p": FakeLLMProvider(responses=[say("never")])}, content_store=content_store)
    async with build_worker(client.temporal, registry, task_queue):
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, TaskInput(goal="x", provider="p", **change), id=f"bad-{task_queue}", task_queue=task_queue
        )
        with pytest.raises(ConfigurationError) as info:
            await asyncio.wait_for(client.result(handle.id), 30)
    assert str(info.value) == message
    assert [e.type for e in await client.events(handle.id)][-1] == "TaskFailed"


# -- tools ---------------------------------------------------------------------------------------


KEYS: list[str] = []


@tool(name="record", version="1", input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
      description="Records its call once per idempotency key, as a de-duplicating tool does.")
def record(arguments: dict, ctx: ToolContext) -> ToolResult:
    if ctx.idempotency_key in KEYS:
        return ToolResult(success=True, output="duplicate: skipped")
    KEYS.append(ctx.idempotency_key)
    return ToolResult(success=True, output=f"recorded {arguments['n']}")


async def test_idempotency_keys_are_unique_even_when_the_model_reuses_call_ids(client, serve, task_queue):
    KEYS.clear()
    provider = FakeLLMProvider(responses=[
        call(("c1", "record", {"n": 1}), ("c1", "record", {"n": 2})),  # one id twice in a turn
        call(("c1", "record", {"n": 3})),  # and again in the next turn
        say("done"),
    ])
    async with serve(tools=[record], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[record]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    assert KEYS == [f"{task_id}/{run_id}/{n}" for n in (1, 2, 3)]
    outputs = sorted(e.payload.summary or "" for e in await client.events(task_id) if e.type == "ToolCallCompleted")
    assert len(outputs) == 3


CALLS: list[int] = []


@tool(name="number", version="1", input_schema={"type": "object"}, description="Returns a number, wrongly.")
def number(arguments: dict, ctx: ToolContext) -> ToolResult:
    CALLS.append(ctx.attempt)
    return ToolResult(success=True, output=123)  # type: ignore[arg-type]


async def test_a_tool_returning_a_non_string_output_runs_once_and_the_model_is_told(client, serve, task_queue):
    CALLS.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "number", {})), say("noted")])
    async with serve(tools=[number], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[number]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "noted"
    assert CALLS == [1]
    [block] = [b for m in provider.received_requests[1].messages for b in m.content if b.type == "tool_result"]
    assert (block.success, block.output) == (
        False, "tool 'number' returned an output of type int; ToolResult.output must be a string"
    )
    [done] = await events_of(client, task_id, "ToolCallCompleted")
    assert (done.attempt, done.success) == (1, False)


RELEASE = threading.Event()
HUNG: list[str] = []


@tool(name="hang_sync", version="1", input_schema={"type": "object"}, description="Blocks its thread.",
      timeout_seconds=2, max_retries=0)
def hang_sync(arguments: dict, ctx: ToolContext) -> ToolResult:
    HUNG.append(ctx.idempotency_key)
    RELEASE.wait(120)  # a synchronous tool that ignores its timeout, as hung I/O does
    return ToolResult(success=True, output="late")


@tool(name="quick_sync", version="1", input_schema={"type": "object"}, description="A healthy sync tool.",
      timeout_seconds=2, max_retries=0)
def quick_sync(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output="quick")


async def test_a_full_sync_tool_pool_is_a_typed_bounded_wait_and_shutdown_does_not_wait_for_hung_threads(
    client: AsyncClient, content_store, task_queue, caplog
):
    caplog.set_level(logging.WARNING, logger="noeta.worker.threads")
    RELEASE.clear()
    HUNG.clear()
    hung = FakeLLMProvider(responder=lambda r: say("gave up") if len(r.messages) > 1 else call(("h", "hang_sync", {})))
    healthy = FakeLLMProvider(responder=lambda r: say(r.messages[-1].content[0].output) if len(r.messages) > 1
                              else call(("q", "quick_sync", {})))
    registry = Registry.of(tools=[hang_sync, quick_sync], providers={"hung": hung, "healthy": healthy},
                           content_store=content_store)
    worker = build_worker(client.temporal, registry, task_queue, tuning=WorkerTuning(sync_tool_threads=1))
    try:
        async with worker:
            task_id = await client.start("h", Options(provider="hung", allowed_tools=["hang_sync"]), task_queue=task_queue)
            assert (await asyncio.wait_for(client.result(task_id), 30)).answer == "gave up"
            options = Options(provider="healthy", allowed_tools=["quick_sync"], rate_limit_wait_seconds=1.5)
            task_id = await client.start("q", options, task_queue=task_queue)
            result = await asyncio.wait_for(client.result(task_id), 30)
            # The one thread stays held by the hung call: the healthy call waited (not counted as a
            # retry) until its wait budget ran out, and the model was told why.
            assert result.answer.startswith("tool 'quick_sync' failed after retries: all 1 sync-tool threads of "
                                            "this worker are busy (1 held by calls whose attempt already ended)")
            retried = await events_of(client, task_id, "ToolCallRetried")
            assert [(r.attempt, r.error_type) for r in retried] == [(1, "WorkerBusyError")]
            [failed] = await events_of(client, task_id, "ToolCallFailed")
            assert (failed.attempt, failed.error_type) == (2, "WorkerBusyError")
        # Leaving the block shut the worker down although the hung thread still runs.
        assert not RELEASE.is_set() and len(HUNG) == 1
        assert any("is still running after its attempt ended" in r.message for r in caplog.records)
    finally:
        RELEASE.set()


async def test_a_worker_process_with_a_hung_sync_tool_stops_on_sigterm(client, settings, data_dir, task_queue, tmp_path):
    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
           "NOETA_TEST_LOG": str(tmp_path / "log"), "PYTHONPATH": str(ROOT),
           "NOETA_SHUTDOWN_GRACE_SECONDS": "1"}  # then running calls are cancelled: the hung one too
    proc = subprocess.Popen(
        [sys.executable, "worker.py", "--registry", "tests.support.registry:hang_registry", "--task-queue", task_queue],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("noeta worker on")
        task_id = await client.start("x", Options(provider="hanging", allowed_tools=["hang_forever"]), task_queue=task_queue)
        await eventually(lambda: (tmp_path / "log").exists())  # the tool's thread is now blocked for good
        proc.send_signal(signal.SIGTERM)
        # The hung call is cancelled after the grace period; its thread stays blocked (a daemon
        # thread that nothing joins), and the process still exits.
        code = await asyncio.to_thread(proc.wait, 30)
        assert code == 0
    finally:
        proc.kill()
        proc.wait()
    await client.temporal.get_workflow_handle(task_id).terminate("test over")


# -- completions that never reach the server ---------------------------------------------------


class LoseFirstCompletion(Interceptor):
    """The first attempt of the given activity finishes its work, then its completion never reaches
    the server in time (as when the server is down): Temporal times the attempt out."""

    def __init__(self, activity_type: str) -> None:
        self.activity_type = activity_type

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outer = self

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput):
                result = await super().execute_activity(input)
                info = activity.info()
                if info.activity_type == outer.activity_type and info.attempt == 1:
                    await asyncio.sleep(60)  # cancelled when the attempt times out
                return result

        return Inbound(next)


RUNS: list[int] = []


@tool(name="side_effect", version="1", input_schema={"type": "object"}, description="Counts its runs.",
      timeout_seconds=3, heartbeat_seconds=1)
async def side_effect(arguments: dict, ctx: ToolContext) -> ToolResult:
    RUNS.append(ctx.attempt)
    return ToolResult(success=True, output="done once")


@pytest.mark.slow
@pytest.mark.parametrize("lost", [INVOKE_TOOL, CALL_MODEL])
async def test_a_finished_step_whose_completion_was_lost_does_not_run_again(client, content_store, task_queue, lost):
    RUNS.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "side_effect", {})), say("finished")])
    registry = Registry.of(tools=[side_effect], providers=[provider], content_store=content_store)
    async with build_worker(client.temporal, registry, task_queue, interceptors=[LoseFirstCompletion(lost)]):
        options = Options(provider=provider, allowed_tools=[side_effect], model_timeout_seconds=3)
        task_id = await client.start("x", options, task_queue=task_queue)
        assert (await asyncio.wait_for(client.result(task_id), 60)).answer == "finished"
    assert RUNS == [1]  # the tool ran once
    assert len(provider.received_requests) == 2  # and the model was asked once per turn
    kind = "ToolCallCompleted" if lost == INVOKE_TOOL else "ProviderCallCompleted"
    attempts = [e.attempt for e in await events_of(client, task_id, kind)]
    assert attempts == ([2] if lost == INVOKE_TOOL else [2, 2])  # attempt 2 answered from the record
