"""Record the workflow histories that the replay tests keep replaying.

    python -m tests.histories.record [--into SUBDIR] [SCENARIO ...]

Run it only to ADD a history for new behaviour, or (``--into <patch id>``) the histories of a new
workflow shape beside the older ones, which keep replaying along their old path. Never re-record an existing file to make a failing
replay pass: a replay failure means running workflows would break; use ``workflow.patched`` or a
new workflow version instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from pathlib import Path

from temporalio.client import WorkflowHistory

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.events import first_run_id
from noeta.client.options import HostConfig, Options, SubAgent
from noeta.client.task_input import Fallback
from noeta.builtins.tools import calculator, current_time, word_count
from noeta.context.content_store import LocalContentStore
from noeta.errors import NoetaError, ProviderError
from noeta.providers.pricing import ModelPrice, PriceTable
from noeta.protocols.budget import UsageLimits
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.protocols.validation import expect_validator
from noeta.sdk.images import image
from noeta.sdk._query import registry_for
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.mcp_server import running_http_server
from tests.support.policies import DelegatingPolicy, ThinkThenDelegate
from tests.support.resources import delegate_to_reader, resources_options
from tests.support.scripts import call, say
from tests.support.tools import add, big_output, boom
from tests.support.windowed import WindowedProvider, fetch
from tests.test_guards import AmountGuard, NoEarlyFinish, wire_money
from tests.test_long_runs import counting_goal

HERE = Path(__file__).parent


def _fail(request):
    raise ProviderError(provider="fake", message="overloaded", status=503, retryable=True)


_failed_once: list[bool] = []


def _fail_once(request):
    if not _failed_once:
        _failed_once.append(True)
        raise ProviderError(provider="fake", message="slow down", status=429, retryable=True, retry_after=0.1)
    return say("second attempt worked")


_busy_once: list[bool] = []


def _busy_then_compute(request):
    """Busy once (a retried model call), then a round of two tools, then the answer."""
    if not _busy_once:
        _busy_once.append(True)
        raise ProviderError(provider="fake", message="busy", status=503, retryable=True)
    if len(request.messages) == 1:
        return call(("c1", "calculator", {"expression": "6 * 7"}), ("c2", "word_count", {"text": "a b c"}))
    return say("42, and 3 words")


_limited_once: list[bool] = []


def _rate_limited_once(request):
    """A 429 asking for a 62 s pause, then the answer."""
    if not _limited_once:
        _limited_once.append(True)
        raise ProviderError(provider="fake", message="slow down", status=429, retryable=True, retry_after=62)
    return say("waited")


def _count_to_four(request):
    done = sum(1 for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result")
    return call((f"c{done}", "add", {"a": done, "b": 1})) if done < 4 else say(f"counted to {done}")


def _delegate_then_add(request):
    """The parent answers in text; its sub-agent adds until a limit stops it."""
    if request.messages[0].text.startswith("sub:"):
        return _count_to_four(request)
    return say("let me delegate")


def _named_model(provider: FakeLLMProvider) -> FakeLLMProvider:
    provider.model = "fake-default-1"  # type: ignore[attr-defined]  # a provider's default model
    return provider


def _child_fails(request):
    """The root calls the ``checker`` sub-agent; the checker's model fails for good (not retryable);
    the root answers after the failed result."""
    if "/sub/" in request.metadata["task_id"]:
        raise ProviderError(provider="fake", message="the checker's model is gone", status=400, retryable=False)
    failed = [b for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result"]
    return say(f"checker failed: {failed[0].error}") if failed else call(("k1", "checker", {"goal": "check it"}))


#: A picture tool results carry (a 1x1 PNG), stored in the recording's content store.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
_store: list[LocalContentStore] = []


@tool(name="screenshot", version="1", input_schema={"type": "object"}, description="Take a picture of the screen.")
def screenshot(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output="captured", images=[image(PIXEL, "image/png", _store[0])])


def _up_then_down(request):
    """Answers the first call with a tool call, then is down (503 on every attempt)."""
    if any(getattr(b, "type", "") == "tool_result" for m in request.messages for b in m.content):
        return _fail(request)
    return call(("c0", "add", {"a": 0, "b": 1}))


def positive_n(data) -> bool | str:
    return True if data["n"] > 0 else "n must be positive"


SCENARIOS = {
    "tool_loop": (
        FakeLLMProvider(
            responses=[
                call(("c1", "add", {"a": 2, "b": 3}), ("c2", "big_output", {"kb": 6}), text="two tools"),
                call(("c3", "boom", {}), ("c4", "nope", {}), ("c5", "add", {"a": "x"})),
                say("the sum is 5"),
            ]
        ),
        dict(goal="add 2 and 3", options=Options(allowed_tools=[add, big_output, boom], system_prompt="Use tools.")),
    ),
    "multi_turn": (
        FakeLLMProvider(responses=[say("first"), say("second")]),
        dict(goal="goal one", options=Options(), keep_open=True, more=["goal two"]),
    ),
    "subtask": (
        FakeLLMProvider(responses=[say("child answer")]),
        dict(goal="delegate me", options=Options(policy=DelegatingPolicy())),
    ),
    "max_turns": (
        FakeLLMProvider(responder=lambda r: call((f"c{len(r.messages)}", "add", {"a": 1, "b": 1}))),
        dict(goal="loop", options=Options(allowed_tools=[add], max_turns=2)),
    ),
    "provider_exhausted": (
        FakeLLMProvider(responder=_fail),
        dict(goal="fail", options=Options(max_retries=1)),
    ),
    "validation": (
        FakeLLMProvider(responses=[say("not json"), say('{"n": -1}'), say('{"n": 7}')]),
        dict(
            goal="pick n",
            options=Options(
                output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                validators=[expect_validator(positive_n)],
            ),
        ),
    ),
    "guards": (
        FakeLLMProvider(
            responses=[
                call(("c1", "wire_money", {"amount": 5_000_000}), ("c2", "wire_money", {"amount": 2000}),
                     ("c3", "wire_money", {"amount": 3000})),
                say("a draft"),
                say("paid 2000"),
            ]
        ),
        dict(
            goal="pay",
            options=Options(allowed_tools=[wire_money], guards=[AmountGuard(), NoEarlyFinish()], approval_timeout_seconds=2),
            approve=[("c2", True, "invoice 7", "alice")],
        ),
    ),
    "continue_as_new": (
        FakeLLMProvider(responder=_count_to_four),
        dict(goal="count", options=Options(allowed_tools=[add], max_history_events=30), inject="remember: be brief"),
    ),
    "goal_continue_as_new": (
        FakeLLMProvider(responder=counting_goal),
        dict(goal="first", options=Options(allowed_tools=[add], max_history_events=40), keep_open=True, more=["count"]),
    ),
    "budget_subtask": (
        FakeLLMProvider(responder=_delegate_then_add),
        dict(
            goal="big job",
            options=Options(policy=ThinkThenDelegate(), allowed_tools=[add], limits=UsageLimits(max_model_calls=3)),
        ),
    ),
    "budget_cost": (
        FakeLLMProvider(responder=_count_to_four),
        dict(
            goal="count",
            options=Options(
                model="house-model", allowed_tools=[add], max_history_events=30,
                limits=UsageLimits(max_cost_usd=0.01, max_tool_calls_per_tool={"add": 10}),
            ),
            prices=PriceTable({"house-model": ModelPrice(input_per_mtok=100, output_per_mtok=1000)}),
        ),
    ),
    # A model that names its default model (NoetaModel), a denied call, an unknown tool, a call a
    # human refuses and one approved: refusals are recorded, not scheduled (PATCH_REFUSALS_RECORDED).
    "refusals": (
        _named_model(
            FakeLLMProvider(
                responses=[
                    call(("c1", "wire_money", {"amount": 5_000_000}), ("c2", "nope", {}),
                         ("c3", "wire_money", {"amount": 2000}), ("c4", "wire_money", {"amount": 3000})),
                    say("paid 3000"),
                ]
            )
        ),
        dict(
            goal="pay",
            options=Options(allowed_tools=[wire_money], guards=[AmountGuard()]),
            approve=[("c3", False, "not this one", "bob"), ("c4", True, "ok", "alice")],
        ),
    ),
    # Approvals that replace a call's arguments (edited-approvals): c1 edited down and run, c2 edited
    # above the guard's hard limit and refused on the guards' second look.
    "edited_approvals": (
        FakeLLMProvider(
            responses=[
                call(("c1", "wire_money", {"amount": 2500}), ("c2", "wire_money", {"amount": 3000})),
                say("paid 900"),
            ]
        ),
        dict(
            goal="pay",
            options=Options(allowed_tools=[wire_money], guards=[AmountGuard()]),
            approve=[("c1", True, "split it", "user:alice", {"amount": 900}),
                     ("c2", True, None, "user:alice", {"amount": 5_000_000})],
        ),
    ),
    "provider_retried": (
        FakeLLMProvider(responder=_fail_once),
        dict(goal="retry once", options=Options(max_retries=2)),
    ),
    # A remote MCP server (streamable HTTP, stopped after recording): its tools listed in prepare_task's
    # marker, one call through invoke_tool. Options are made from the server's URL.
    "mcp_tools": (
        FakeLLMProvider(responses=[call(("c1", "mcp__web__add", {"a": 2, "b": 40})), say("42")]),
        dict(goal="add with MCP", options=lambda url: Options(mcp_servers={"web": {"type": "http", "url": url}})),
    ),
    # A tool result with an image: the model gets it with the image (what once drifted).
    "image_tool": (
        FakeLLMProvider(responses=[call(("s1", "screenshot", {})), say("a white pixel")]),
        dict(goal="what is on screen?", options=Options(allowed_tools=[screenshot])),
    ),
    # A sub-agent that fails: its parent's model gets the innermost failure (what once drifted).
    "failed_subtask": (
        FakeLLMProvider(responder=_child_fails),
        dict(goal="check it", options=Options(subagents=[SubAgent("checker", "Checks things.", Options(max_retries=0))])),
    ),
    # A 3,000-token window and twelve 2 KB tool results: the oldest turns are summarized before the
    # calls that would pass the threshold (PATCH_COMPACTION), the view rides on later calls.
    "compaction": (
        WindowedProvider(window=3000, turns=12, name="FakeLLMProvider"),
        dict(goal="fetch", options=Options(allowed_tools=[fetch], max_turns=20, context_window_tokens=3000)),
    ),
    # A window configured four times too large: one refusal teaches the task the provider's window
    # (PATCH_LEARNED_WINDOW), later compactions come by its threshold, across continue-as-new.
    "learned_window": (
        WindowedProvider(window=3000, turns=16, name="FakeLLMProvider"),
        dict(goal="fetch", options=Options(allowed_tools=[fetch], max_turns=20, context_window_tokens=12000,
                                           max_history_events=80)),
    ),
    # The built-in tools that cannot block, in one round and then alone: local activities since
    # local-tools (recorded before it in refusals-recorded/, as ordinary activities).
    "builtin_tools": (
        FakeLLMProvider(
            responses=[
                call(("c1", "calculator", {"expression": "6 * 7"}), ("c2", "word_count", {"text": "a b c"})),
                call(("c3", "current_time", {})),
                say("42, and 3 words"),
            ]
        ),
        dict(goal="compute", options=Options(allowed_tools=[calculator, word_count, current_time])),
    ),
    # Every model call a local activity (model_local_activity), the first one retried once, the
    # built-in local tools in between: the whole task is markers in one workflow task.
    "local_model_calls": (
        FakeLLMProvider(responder=_busy_then_compute),
        dict(goal="compute", options=Options(allowed_tools=[calculator, word_count], model_local_activity=True)),
    ),
    # 22 model calls with model_local_activity: the 20th is an ordinary activity, which ends the
    # workflow task (LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK), so a change of that number fails this replay.
    "local_model_calls_long": (
        FakeLLMProvider(responses=[*[call((f"c{n}", "calculator", {"expression": f"{n} * 2"})) for n in range(21)], say("done")]),
        dict(goal="double", options=Options(allowed_tools=[calculator], model_local_activity=True)),
    ),
    # The same 22 calls after PATCH_LOCAL_REPORTS: the patch is asked at turn 20 (its marker), the
    # call stays local, and the whole task is one workflow task (record with --into local-reports-100).
    "local_model_calls_reports": (
        FakeLLMProvider(responses=[*[call((f"c{n}", "calculator", {"expression": f"{n} * 2"})) for n in range(21)], say("done")]),
        dict(goal="double", options=Options(allowed_tools=[calculator], model_local_activity=True)),
    ),
    # A local model call whose provider asked for a 62 s pause: past temporalio's local retry
    # threshold (60 s) the worker records the failed attempt in a marker with its backoff, waits on a
    # timer and runs the next attempt in a later workflow task.
    "local_model_backoff": (
        FakeLLMProvider(responder=_rate_limited_once),
        dict(goal="wait for it", options=Options(model_local_activity=True)),
    ),
    # A provider that goes down after its first answer: the task moves to its fallback provider
    # (one memo, PATCH_PROVIDER_FALLBACK) and stays there across continue-as-new.
    "provider_fallback": (
        FakeLLMProvider(responder=_up_then_down),
        dict(
            goal="count",
            options=Options(
                allowed_tools=[add], max_retries=1, max_history_events=40,
                fallback_providers=[Fallback("backup", model="backup-model")],
            ),
            fallbacks={"backup": FakeLLMProvider(responder=_count_to_four)},
        ),
    ),
    # A task-scoped resource exposed to a sub-agent the model calls, with a scope (task-resources).
    "resources": (
        FakeLLMProvider(responder=delegate_to_reader),
        dict(goal="read the label", options=resources_options()),
    ),
}


async def run_histories(client: AsyncClient, task_id: str) -> list[WorkflowHistory]:
    """One history per run of the task (continue-as-new starts a new run)."""
    runs: list[WorkflowHistory] = []
    run_id: str | None = await first_run_id(client.temporal, task_id)
    while run_id:
        history = await client.temporal.get_workflow_handle(task_id, run_id=run_id).fetch_history()
        runs.append(history)
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id or None
    return runs


async def record(names: list[str], into: Path = HERE) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(Path(tmp) / "temporal", headless=True).start()
        try:
            store = LocalContentStore(Path(tmp) / "content")
            _store[:] = [store]
            client = await AsyncClient.connect(
                HostConfig(settings=Settings(temporal_address=server.address, home=Path(tmp)), content_store=store)
            )
            for name in names:
                provider, spec = SCENARIOS[name]
                made = callable(spec["options"])
                with running_http_server() if made else contextlib.nullcontext() as url:
                    options: Options = spec["options"](url) if made else spec["options"]
                    registry = registry_for(options, store)
                    registry.add_provider(provider)
                    for fallback_name, fallback in spec.get("fallbacks", {}).items():
                        registry.add_provider(fallback, name=fallback_name)
                    registry.prices = spec.get("prices")
                    task_id = await run_scenario(client, registry, name, spec, options)
                runs = await run_histories(client, task_id)
                for number, history in enumerate(runs, start=1):
                    stem = name if len(runs) == 1 else f"{name}.run{number}"
                    into.mkdir(parents=True, exist_ok=True)
                    (into / f"{stem}.json").write_text(history.to_json())
                    print(f"recorded {stem}: {len(history.events)} events")
        finally:
            server.stop()


async def run_scenario(client: AsyncClient, registry: Registry, name: str, spec: dict, options: Options) -> str:
    queue = f"record-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, queue):
        task_id = await client.start(
            spec["goal"], options, provider_name="FakeLLMProvider", task_queue=queue,
            keep_open=spec.get("keep_open", False), task_id=f"history-{name}",
        )
        if "inject" in spec:
            await client.inject(task_id, spec["inject"])
        for call_id, approved, reason, approver, *edit in spec.get("approve", []):
            while not any(r.call_id == call_id for r in await client.pending_approvals(task_id)):
                await asyncio.sleep(0.05)
            await client.approve(task_id, call_id, approved, reason, approver, arguments=edit[0] if edit else None)
        for goal in spec.get("more", []):
            await client.send_goal(task_id, goal)
        if spec.get("keep_open"):
            await client.close_task(task_id)
        try:
            await client.result(task_id)
        except NoetaError:
            pass
    return task_id


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    into = HERE
    if args[:1] == ["--into"]:
        into, args = HERE / args[1], args[2:]
    wanted = args or [n for n in SCENARIOS if not list(into.glob(f"{n}.*json")) and not (into / f"{n}.json").exists()]
    asyncio.run(record(wanted, into))
