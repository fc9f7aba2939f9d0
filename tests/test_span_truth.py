"""Telemetry that says what happened, as an operator's collector receives it (a real OTLP/HTTP
receiver): a failed provider call's span carries the provider's own error type and where it was
called, a finished one the model that answered, and a task waiting for a human shows its
``invoke_agent`` root span before it ends."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.context.content_store import LocalContentStore
from noeta.errors import ProviderError
from noeta.sdk.testing import FakeLLMProvider
from noeta.telemetry.error_types import provider_error_type
from noeta.worker import Registry, build_worker
from tests.support.chat_server import FakeChatServer, completion, openai_for
from tests.support.otlp_receiver import OTLPReceiver
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, wire_money
from tests.test_trace_export import by_name, receiver, traced, worker  # noqa: F401 (fixtures)

BILLING = {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": None}}


async def test_a_failed_chat_span_carries_the_providers_error_type_and_server(
    traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str, chat: FakeChatServer,  # noqa: F811
):
    chat.reply(completion({"content": "hello"}))
    chat.reply(BILLING, status=403)
    async with worker(traced, content_store, task_queue, providers={"billing": openai_for(chat, name="billing")}):
        ok = await traced.start("say hello", Options(provider="billing"), task_queue=task_queue)
        assert (await traced.result(ok)).answer == "hello"
        failing = await traced.start("say hello again", Options(provider="billing"), task_queue=task_queue)
        with pytest.raises(ProviderError) as refused_call:
            await traced.result(failing)
        assert (refused_call.value.status, refused_call.value.error_type) == (403, "insufficient_quota")

    def chats(task_id: str) -> list:
        return [s for s in by_name(receiver.spans, "chat ") if s.attributes.get("gen_ai.conversation.id") == task_id]

    await eventually(lambda: chats(ok) and chats(failing))
    [answered], [refused] = chats(ok), chats(failing)
    host = chat.base_url.split("//", 1)[1].split(":", 1)[0]
    for span in (answered, refused):
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert (span.attributes["server.address"], span.attributes["server.port"]) == (host, int(chat.base_url.rsplit(":", 1)[1].split("/")[0]))
    assert answered.attributes["gen_ai.response.model"] == "gpt-test"
    assert "error.type" not in answered.attributes
    assert refused.attributes["error.type"] == "insufficient_quota"  # the provider's, not ApplicationError


def test_the_error_type_is_the_providers_own_under_the_activitys_wrapper():
    def wrapped(cause: BaseException) -> ApplicationError:
        try:
            raise ApplicationError("model call failed", type="ProviderError") from cause
        except ApplicationError as err:
            return err

    overloaded = ProviderError(provider="a", message="Overloaded", status=529, error_type="overloaded_error")
    assert provider_error_type(wrapped(overloaded)) == "overloaded_error"
    assert provider_error_type(wrapped(ProviderError(provider="a", message="<html>bad gateway", status=502))) == "502"
    assert provider_error_type(wrapped(ConnectionRefusedError("refused"))) == "ConnectionRefusedError"
    assert provider_error_type(ApplicationError("no answer within 5 s", type="ProviderError")) == "ProviderError"
    assert provider_error_type(IndexError("script ran out")) == "IndexError"


async def test_a_task_waiting_for_approval_shows_its_invoke_agent_span_before_it_ends(
    traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str,  # noqa: F811
):
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    options = Options(provider=provider, allowed_tools=["wire_money"], guards=["amount"])
    registry = Registry.of(tools=[wire_money], providers=[provider], content_store=content_store, guards=[AmountGuard()])
    async with build_worker(traced.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await traced.start("pay 2500", options, task_queue=task_queue)

        def of_task(prefix: str) -> list:
            return [s for s in by_name(receiver.spans, prefix) if s.attributes.get("gen_ai.conversation.id") == task_id]

        async def waiting() -> bool:
            return (await traced.describe(task_id)).status == "awaiting_approval"

        await eventually(waiting, timeout=30)
        await eventually(lambda: of_task("invoke_agent") and of_task("chat "))
        [agent], [first_chat] = of_task("invoke_agent"), of_task("chat ")
        assert agent.attributes["noeta.span.phase"] == "started"  # visible while the task waits
        assert first_chat.parent_id == agent.span_id and first_chat.trace_id == agent.trace_id  # no orphan
        await traced.approve(task_id, "c1", True)
        assert (await traced.result(task_id)).answer == "paid"
    await eventually(lambda: of_task("invoke_agent")[0].attributes.get("noeta.span.phase") == "ended")
    [ended] = of_task("invoke_agent")
    assert (ended.span_id, ended.attributes["noeta.status"]) == (agent.span_id, "completed")
