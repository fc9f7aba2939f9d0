"""Guards and human approvals: verdicts are recorded, approvals are durable waits."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ApprovalNotPendingError, GuardNotRegisteredError
from noeta.protocols.hooks import ProposedFinish, ProposedToolCall, VerdictResult
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call, say
from tests.support.waiting import eventually

runs: list[dict] = []


@tool(name="wire_money", version="1", risk_level="high",
      input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]})
def wire_money(arguments, ctx):
    runs.append(arguments)
    return ToolResult(success=True, output=f"wired {arguments['amount']}")


@dataclass(frozen=True)
class AmountGuard:
    """Small wires pass, big ones need a human, absurd ones are refused."""

    name: str = "amount"

    def check(self, action, ctx) -> VerdictResult:
        if isinstance(action, ProposedToolCall) and action.tool_name == "wire_money":
            amount = action.arguments["amount"]
            if amount > 1_000_000:
                return VerdictResult("deny", "amount above the hard limit")
            if amount > 1000:
                return VerdictResult("ask", f"wire of {amount} needs a human")
        return VerdictResult("allow")


@dataclass(frozen=True)
class NoEarlyFinish:
    name: str = "no-early-finish"

    async def check(self, action, ctx) -> VerdictResult:
        if isinstance(action, ProposedFinish) and "draft" in action.answer:
            return VerdictResult("deny", "a draft is not an answer")
        return VerdictResult("allow")


def result_for(request, call_id: str) -> ToolResultBlock:
    [block] = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock) and b.call_id == call_id]
    return block


@pytest.fixture(autouse=True)
def clear_runs():
    runs.clear()


async def test_deny_never_runs_the_tool_and_tells_the_model(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 5_000_000})), say("refused")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "refused"
    assert runs == []
    block = result_for(provider.received_requests[1], "c1")
    assert (block.success, block.output) == (False, "Denied by guard 'amount': amount above the hard limit")
    verdicts = [e for e in await client.events(task_id) if e.type == "GuardVerdict"]
    assert [v.payload.call_id for v in verdicts] == ["c1", "finish:0:1"]  # the finish is guarded too
    verdict = verdicts[0]
    assert (verdict.actor, verdict.payload.verdict) == ("guard:amount", "deny")


async def test_ask_waits_durably_for_a_human_across_workers(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        await eventually(lambda: pending(client, task_id))
        [request] = await client.pending_approvals(task_id)
        assert (request.call_id, request.reason, request.guard) == ("c1", "wire of 2500 needs a human", "amount")
    assert runs == []  # no worker now; the task waits in Temporal, not in a process
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        with pytest.raises(ApprovalNotPendingError, match="no action 'c9' is waiting"):
            await client.approve(task_id, "c9")
        await client.approve(task_id, "c1", approved=True, approver="alice", reason="invoice 7")
        assert (await client.result(task_id)).answer == "paid"
    assert runs == [{"amount": 2500}]
    types = [e.type for e in await client.events(task_id)]
    assert types.index("GuardVerdict") < types.index("ApprovalRequested") < types.index("ApprovalGranted") < types.index("ToolCallStarted")
    [granted] = [e.payload for e in await client.events(task_id) if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.reason) == ("alice", "invoice 7")


async def pending(client: AsyncClient, task_id: str) -> bool:
    return bool(await client.pending_approvals(task_id))


async def test_refusal_and_timeout_reach_the_model(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(
        responses=[call(("c1", "wire_money", {"amount": 2000}), ("c2", "wire_money", {"amount": 3000})), say("ok")]
    )
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()], approval_timeout_seconds=3)
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay twice", options, task_queue=task_queue)
        await eventually(lambda: pending(client, task_id))
        await client.approve(task_id, "c1", approved=False, approver="bob", reason="duplicate")
        assert (await client.result(task_id)).answer == "ok"  # c2 is never answered: it times out
    assert runs == []
    second = provider.received_requests[1]
    assert result_for(second, "c1").output == "Not approved by bob: duplicate"
    assert result_for(second, "c2").output == "Not approved by timeout: no answer within 3s"
    denied = [e for e in await client.events(task_id) if e.type == "ApprovalDenied"]
    assert [(e.payload.call_id, e.payload.approver, e.actor) for e in denied] == [
        ("c1", "bob", "human"), ("c2", "timeout", "engine"),
    ]


async def test_finish_guard_sends_the_model_back_to_work(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("a draft"), say("the final answer")])
    async with serve(providers=[provider], guards=[NoEarlyFinish()]):
        task_id = await client.start("write", Options(provider=provider, guards=[NoEarlyFinish()]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "the final answer"
    assert provider.received_requests[1].messages[-1].text == (
        "You may not finish yet: Denied by guard 'no-early-finish': a draft is not an answer\nContinue the task."
    )
    assert provider.received_requests[1].messages[-1].origin == "system"
    messages = await client.messages(task_id)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage", "AssistantMessage", "InjectedMessage", "AssistantMessage", "Result",
    ]


async def test_guard_missing_on_worker_fails_before_the_model(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("x")])
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, guards=[AmountGuard()]), task_queue=task_queue)
        with pytest.raises(GuardNotRegisteredError, match="guard 'amount' is not registered"):
            await client.result(task_id)
    assert provider.received_requests == []


async def test_a_policy_that_keeps_finishing_against_a_guard_is_stopped(client: AsyncClient, serve, task_queue):
    from tests.support.policies import AlwaysFinish

    provider = FakeLLMProvider(responses=[])
    async with serve(providers=[provider], guards=[NoEarlyFinish()]):
        task_id = await client.start(
            "x", Options(provider=provider, policy=AlwaysFinish(), guards=[NoEarlyFinish()], max_turns=3),
            task_queue=task_queue,
        )
        result = await client.result(task_id)
    assert result.status == "failed"
    assert result.answer == (
        "finishing was refused 3 times; the last refusal: Denied by guard 'no-early-finish': a draft is not an answer"
    )
    assert provider.received_requests == []


async def test_the_inbox_is_not_held_up_by_a_task_whose_worker_is_down(
    client: AsyncClient, content_store, serve, task_queue
):
    """Every task awaiting approval is asked at once, each within a bound: one whose worker is
    down cannot answer, and the others' approvals still come back."""
    import time

    from noeta.client.inspection import INBOX_QUERY_SECONDS
    from noeta.worker import Registry, build_worker

    def waiting_task(tag: str) -> tuple[FakeLLMProvider, Options]:
        provider = FakeLLMProvider(responses=[call((f"{tag}1", "wire_money", {"amount": 2500})), say("paid")])
        return provider, Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])

    async def in_inbox(task_id: str) -> bool:
        return any(p.task_id == task_id for p in await client.approvals_waiting())

    orphan_provider, orphan_options = waiting_task("o")
    orphan_queue = f"{task_queue}-orphan"
    registry = Registry.of(tools=[wire_money], providers=[orphan_provider], guards=[AmountGuard()],
                           content_store=content_store)
    async with build_worker(client.temporal, registry, orphan_queue):
        orphan = await client.start("pay the orphan", orphan_options, task_queue=orphan_queue)
        await eventually(lambda: in_inbox(orphan))
    # Its worker is gone: the orphan stays awaiting approval with no one to answer a query.
    provider, options = waiting_task("l")
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        live = await client.start("pay the live one", options, task_queue=task_queue)
        await eventually(lambda: in_inbox(live), timeout=60)
        started = time.monotonic()
        inbox = {p.task_id for p in await client.approvals_waiting()}
        took = time.monotonic() - started
    assert live in inbox and orphan not in inbox
    assert took < INBOX_QUERY_SECONDS + 10  # one bounded round, not a wait on the silent task
    assert runs == []
