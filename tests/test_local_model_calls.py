"""Model calls as local activities (``Options(model_local_activity=True)``): one marker per call,
the same retries, typed errors and event log as an activity's, bounded at the task's start."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from noeta.builtins.tools import calculator
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.projection.payloads import decode_first
from noeta.errors import AttemptsExhaustedError, ConfigurationError, ProviderError
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.local_model_calls import (
    LOCAL_MODEL_MAX_TIMEOUT_SECONDS,
    ModelCallStart,
    model_call_start,
    model_call_activity_id,
)
from noeta.protocols.activity_io import PrepareOutput
from noeta.protocols.names import CALL_MODEL, PATCH_LOCAL_MODEL_CALLS, PREPARED_SHAPE, SHAPE_LOCAL_MODEL_CALLS_BY_DATA
from noeta.sdk.testing import FakeLLMProvider
from noeta.workflows import patches
from tests.support.local_calls import scheduled_and_markers
from tests.support.processes import ROOT, killed_and_replaced, worker_env
from tests.support.replay import replay
from tests.support.scripts import call, say

LOCAL = Options(model_local_activity=True)


async def model_call_events(client: AsyncClient, task_id: str) -> tuple[int, int]:
    """(call model activities scheduled, its local-activity markers) in the task's history."""
    return await scheduled_and_markers(client, task_id, CALL_MODEL)


def test_a_local_model_calls_timeout_above_the_limit_is_refused():
    too_long = ActivityOptions(start_to_close_seconds=LOCAL_MODEL_MAX_TIMEOUT_SECONDS + 1)
    with pytest.raises(ConfigurationError, match="at most 120 s with model_local_activity"):
        Options(model_local_activity=True, model_activity=too_long)
    Options(model_activity=too_long)  # an ordinary model call may take that long
    with pytest.raises(ConfigurationError, match="does not read the deprecated"):
        Options(model_local_activity=True, model_timeout_seconds=20)
    Options(model_local_activity=True, model_activity=ActivityOptions(start_to_close_seconds=LOCAL_MODEL_MAX_TIMEOUT_SECONDS))


def test_the_activity_id_carries_the_call_and_nothing_else_parses_as_one():
    call_ = ModelCallStart(turn=3, provider="open/ai \"x\"", model=None, messages_appended=2)
    assert model_call_start(model_call_activity_id(call_)) == call_
    for other in ("1/c1", "", "[1,2]", '["a","b",null,1]', "null"):
        assert model_call_start(other) is None


async def test_a_five_step_task_with_local_calls_costs_these_events(client: AsyncClient, serve, task_queue):
    """The count a change must not raise silently (bench/RESULTS.md): 5 steps of one model call
    and one local tool call, then the answer, every model call a local activity too."""
    steps = [call((f"c{n}", "calculator", {"expression": f"{n} + 1"})) for n in range(5)]
    provider = FakeLLMProvider(responses=[*steps, say("done")])
    async with serve(tools=[calculator], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[calculator], model_local_activity=True)
        task_id = await client.start("x", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.answer, result.turns) == ("done", 6)
    assert await model_call_events(client, task_id) == (0, 6)
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    kinds = [EventType.Name(e.event_type) for e in history.events]
    workflow_tasks = kinds.count("EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
    # Start and its workflow task (4), one marker each for prepare, 6 model and 5 tool calls (12),
    # the final search-attribute upsert and result memo (2), completion (1): the calls ran as the
    # first workflow task went, none of them reached the server on its own. The task's recorded
    # shape decides the local path: no patch marker, no TemporalChangeVersion upsert.
    assert (len(kinds), workflow_tasks) == (19, 1), kinds
    markers = [e.marker_recorded_event_attributes for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert {m.marker_name for m in markers} == {"core_local_activity"}
    assert decode_first(markers[0].details["result"], PrepareOutput).shape == PREPARED_SHAPE >= SHAPE_LOCAL_MODEL_CALLS_BY_DATA
    envs = await client.events(task_id)
    started = [e.payload for e in envs if e.type == "ProviderCallStarted"]
    name = started[0].provider  # the name the provider object was registered under
    assert [(s.turn, s.provider, s.local) for s in started] == [(n, name, True) for n in range(1, 7)]
    assert [s.messages_appended for s in started] == [1, 1, 1, 1, 1, 1]
    completed = [e.payload for e in envs if e.type == "ProviderCallCompleted"]
    assert [(c.stop_reason, c.attempt, c.local) for c in completed] == [("tool_use", 1, True)] * 5 + [("end_turn", 1, True)]
    # The answers are in the event log's transcript, in order, after their calls.
    answers = [e for e in envs if e.type == "MessagesAppended" and e.actor == f"provider:{name}"]
    assert len(answers) == 6 and answers[-1].payload.messages[0].text == "done"
    assert [e.type for e in envs][-1] == "TaskCompleted"


async def test_a_patch_marker_that_a_worker_of_the_previous_release_recorded_replays(
    client: AsyncClient, serve, task_queue, monkeypatch: pytest.MonkeyPatch
):
    """During a rollout a worker of the previous release may make the model calls of a task that a
    new worker prepared (shape recorded): it asks the local-model-calls patch and records its
    marker. New workers must replay that history, and a task they prepare and run themselves
    replays without one."""

    today = patches.by_shape

    def previous_release(patch_id, shape, since_shape):  # the code before shapes decided model calls
        return patches.patched(patch_id) if patch_id == PATCH_LOCAL_MODEL_CALLS else today(patch_id, shape, since_shape)

    def two_calls():
        return FakeLLMProvider(responses=[call(("c1", "calculator", {"expression": "1 + 1"})), say("done")])

    with monkeypatch.context() as patched_worker:
        patched_worker.setattr(patches, "by_shape", previous_release)
        provider = two_calls()
        async with serve(tools=[calculator], providers=[provider]):
            options = Options(provider=provider, allowed_tools=[calculator], model_local_activity=True)
            older = await client.start("x", options, task_queue=task_queue)
            assert (await client.result(older)).answer == "done"
    provider = two_calls()
    async with serve(tools=[calculator], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[calculator], model_local_activity=True)
        newer = await client.start("x", options, task_queue=task_queue)
        assert (await client.result(newer)).answer == "done"
    for task_id, patch_markers in ((older, 1), (newer, 0)):
        history = await client.temporal.get_workflow_handle(task_id).fetch_history()
        kinds = [e.marker_recorded_event_attributes.marker_name for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
        assert kinds.count("core_patch") == patch_markers
        assert await model_call_events(client, task_id) == (0, 2)
        assert await replay(history) is None


def failing_then(failures: int) -> FakeLLMProvider:
    """A provider that fails ``failures`` times with a retryable 503, then answers."""
    calls = []

    def responder(request):
        calls.append(1)
        if len(calls) <= failures:
            raise ProviderError(provider="fake", message=f"overloaded ({len(calls)})", status=503, retryable=True)
        return say("at last")

    return FakeLLMProvider(responder=responder)


async def test_a_local_model_call_is_retried_up_to_provider_retries_and_logged_as_local(
    client: AsyncClient, serve, task_queue
):
    provider = failing_then(2)
    async with serve(providers=[provider]):
        options = Options(provider=provider, model_local_activity=True, provider_retries=2)
        task_id = await client.start("x", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "at last"
    assert len(provider.received_requests) == 3
    assert await model_call_events(client, task_id) == (0, 1)
    envs = await client.events(task_id)
    assert [(e.payload.attempt, e.payload.error) for e in envs if e.type == "ProviderCallRetried"] == [
        (1, "provider 'fake' (HTTP 503): overloaded (1)"),
        (2, "provider 'fake' (HTTP 503): overloaded (2)"),
    ]
    [completed] = [e.payload for e in envs if e.type == "ProviderCallCompleted"]
    assert (completed.attempt, completed.local) == (3, True)


async def test_a_local_model_call_that_keeps_failing_ends_in_attempts_exhausted(client: AsyncClient, serve, task_queue):
    provider = failing_then(10)
    async with serve(providers=[provider]):
        options = Options(provider=provider, model_local_activity=True, max_retries=1)
        task_id = await client.start("x", options, task_queue=task_queue)
        with pytest.raises(AttemptsExhaustedError) as info:
            await client.result(task_id)
    assert (info.value.attempts, info.value.last_failure_type) == (2, "provider")
    assert info.value.issues == ["provider 'fake' (HTTP 503): overloaded (1)", "provider 'fake' (HTTP 503): overloaded (2)"]
    assert len(provider.received_requests) == 2
    envs = await client.events(task_id)
    assert [e.type for e in envs][-4:] == ["ProviderCallRetried", "ProviderCallFailed", "AttemptsExhausted", "TaskFailed"]
    [failed] = [e.payload for e in envs if e.type == "ProviderCallFailed"]
    assert (failed.attempt, failed.local, failed.error_type) == (2, True, "ProviderError")


async def test_a_non_retryable_error_of_a_local_model_call_fails_the_task_with_its_type(
    client: AsyncClient, serve, task_queue
):
    def responder(request):
        raise ProviderError(provider="fake", message="bad request: messages.0", status=400)

    provider = FakeLLMProvider(responder=responder)
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, model_local_activity=True), task_queue=task_queue)
        with pytest.raises(ProviderError) as info:
            await client.result(task_id)
    assert (info.value.status, info.value.retryable) == (400, False)
    assert len(provider.received_requests) == 1


async def test_a_worker_killed_during_a_local_model_call_the_call_completes_on_another(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    log = tmp_path / "model.log"
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_TEST_LOG=str(log))
    replaced = await killed_and_replaced(
        env, task_queue, "tests.support.registry:slow_model_registry",
        start=lambda: client.start(
            "hello", Options(provider="scripted", model_local_activity=True), task_queue=task_queue
        ),
        killed_when=lambda: log.exists() and "start" in log.read_text(),
        finish=client.result, finish_timeout=90,
    )
    assert (replaced.result.status, replaced.result.answer) == ("completed", "answered hello")
    # The killed worker's call left no record: the next worker makes it again, from its first attempt.
    assert log.read_text().splitlines() == [
        f"start pid={replaced.killed_pid}", f"start pid={replaced.second_pid}", f"done pid={replaced.second_pid}",
    ]
    assert await model_call_events(client, replaced.task_id) == (0, 1)
    [completed] = [e.payload for e in await client.events(replaced.task_id) if e.type == "ProviderCallCompleted"]
    assert (completed.attempt, completed.local) == (1, True)


async def test_local_model_calls_stream_to_the_workers_sink_not_the_workflow_stream(
    client: AsyncClient, content_store, task_queue: str
):
    """A local call holds the workflow task that the workflow stream's readers query through, so its
    pieces go to the worker's sink and delta broker only: every piece of every call, once, in order,
    and no batch signal in the task's history."""
    from noeta.protocols.names import SIGNAL_STREAM_BATCH
    from noeta.worker import Registry, build_worker
    from tests.test_workflow_streams import Streamer, note

    streamer, pieces = Streamer(), []
    streamer.go.set()
    registry = Registry.of(providers=[streamer], tools=[note], content_store=content_store)
    registry.delta_sink = pieces.append
    options = Options(provider="streamer", allowed_tools=[note], model_local_activity=True)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("take notes", options, task_queue=task_queue)
        await client.result(task_id)
    assert [(d.call_id, d.text) for d in pieces] == [
        (f"turn-{t + 1}", f"[{t}.{i}]") for t in range(Streamer.CALLS) for i in range(6)
    ]
    assert await model_call_events(client, task_id) == (0, Streamer.CALLS)
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    assert not [e for e in history.events if e.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_STREAM_BATCH]


async def test_cancelling_the_task_cancels_a_running_local_model_call(client: AsyncClient, serve, task_queue):
    """The cancellation reaches the workflow when its workflow task next reports (a local call holds
    it), and the call sees it: the task ends TaskCancelled."""
    from tests.support.cancellation import Pause, cancel_once_started

    pause = Pause(25)

    class Sleepy:
        name = "sleepy"

        async def complete(self, request):
            await pause.run()
            return say("never")

    async with serve(providers=[Sleepy()]):
        options = Options(provider="sleepy", model_local_activity=True)
        task_id = await client.start("x", options, task_queue=task_queue)
        await cancel_once_started(client, task_id, pause)


def test_a_retry_after_a_long_backoff_is_projected_as_a_retry_not_a_failure():
    """Past temporalio's local retry threshold (60 s) a failed attempt is recorded in a marker with
    its backoff, a timer waits and the next attempt runs in a later workflow task (recorded: a 429
    asking for 62 s). The event log shows one call, retried once, not a failed call and a second one."""
    import json

    from temporalio.client import WorkflowHistory

    from noeta.client.projection.projector import project

    path = ROOT / "tests" / "histories" / "local-model-calls" / "local_model_backoff.json"
    history = WorkflowHistory.from_json("history-local_model_backoff", path.read_text())
    kinds = [e.event_type for e in history.events]
    assert kinds.count(EventType.EVENT_TYPE_TIMER_FIRED) == 1  # the history holds the backoff marker
    envs = project(history.events, "history-local_model_backoff")
    calls = [e.type for e in envs if e.type.startswith("ProviderCall")]
    assert calls == ["ProviderCallStarted", "ProviderCallRetried", "ProviderCallCompleted"]
    [retried] = [e.payload for e in envs if e.type == "ProviderCallRetried"]
    assert (retried.attempt, retried.retry_after) == (1, 62)
    [completed] = [e.payload for e in envs if e.type == "ProviderCallCompleted"]
    assert (completed.attempt, completed.local) == (2, True)
    assert json.loads(json.dumps([e.type for e in envs]))[-1] == "TaskCompleted"


async def test_a_long_run_of_local_calls_reports_to_the_server_and_continues_as_new(
    client: AsyncClient, serve, task_queue
):
    """Every LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK-th call is an ordinary activity, which ends the
    workflow task, so a fast model's task reaches the server in bounded pieces and sees its history
    grow: with max_history_events it continues as new, its next runs' calls local too, and the
    event log reads every call of every run."""
    from noeta.protocols.local_model_calls import LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK as EVERY

    steps = [call((f"c{n}", "calculator", {"expression": f"{n} + 1"})) for n in range(2 * EVERY + 4)]
    provider = FakeLLMProvider(responses=[*steps, say("done")])
    async with serve(tools=[calculator], providers=[provider]):
        options = Options(
            provider=provider, allowed_tools=[calculator], model_local_activity=True, max_history_events=40,
            max_turns=len(steps) + 1,
        )
        task_id = await client.start("x", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.answer, result.turns) == ("done", len(steps) + 1)
    handle = client.temporal.get_workflow_handle(task_id)
    description = await handle.describe()
    assert description.raw_description.workflow_execution_info.first_run_id != description.run_id  # continued as new
    first = await client.temporal.get_workflow_handle(
        task_id, run_id=description.raw_description.workflow_execution_info.first_run_id
    ).fetch_history()
    kinds = [EventType.Name(e.event_type) for e in first.events]
    # The first run: EVERY - 1 local calls in its first workflow task, then call EVERY as an activity.
    assert kinds.count("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED") == 1
    assert kinds[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    assert len(kinds) < 40 + 2 * EVERY + 10  # bounded by the limit plus one workflow task's calls
    envs = await client.events(task_id)
    started = [e.payload for e in envs if e.type == "ProviderCallStarted"]
    assert [(s.turn, s.local) for s in started] == [(n, n % EVERY != 0) for n in range(1, len(steps) + 2)]
    assert [e.type for e in envs][-1] == "TaskCompleted"
