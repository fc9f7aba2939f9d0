"""The seed's remaining points, end to end: thinking and effort set from Options reach both
adapters' wire bodies, Anthropic thinking survives a tool round in the durable transcript, and
validation retries are counted apart from model and tool retries."""

from __future__ import annotations

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import AttemptsExhaustedError, ConfigurationError, ProviderError
from noeta.protocols.messages import ThinkingBlock
from noeta.protocols.tool import ToolResult
from noeta.providers.anthropic import AnthropicProvider
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.chat_server import FakeChatServer, completion, openai_for
from tests.support.messages_server import message, running_messages_server, text, thinking, tool_use
from tests.support.scripts import say
from tests.support.tools import add


async def test_thinking_and_effort_reach_anthropic_and_thinking_survives_the_tool_round(
    client: AsyncClient, serve, task_queue
):
    with running_messages_server() as server:
        server.reply(
            message([thinking("Add them with the tool.", "sig-7"), tool_use("toolu_1", "add", {"a": 2, "b": 3})], stop_reason="tool_use")
        )
        server.reply(message([thinking("Now answer.", "sig-8"), text("5")]))
        provider = AnthropicProvider(base_url=server.base_url, api_key="k", model="claude-test", name="anthropic-fake")
        async with serve(tools=[add], providers=[provider]):
            options = Options(
                provider="anthropic-fake", allowed_tools=[add], thinking={"type": "enabled", "budget_tokens": 2048}, effort="medium"
            )
            task_id = await client.start("2 + 3?", options, task_queue=task_queue)
            result = await client.result(task_id)
        first, second = (seen.body for seen in server.seen)
    assert result.answer == "5"
    for body in (first, second):
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["output_config"] == {"effort": "medium"}
    # The assistant turn of the tool round goes back with its signed thinking first.
    assert second["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Add them with the tool.", "signature": "sig-7"}
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    # The projection keeps the thinking out of what users read as the answer.
    events = await client.events(task_id)
    replies = [e.payload.messages[0] for e in events if e.type == "MessagesAppended" and e.actor.startswith("provider:")]
    assert isinstance(replies[0].content[0], ThinkingBlock) and replies[-1].text == "5"


async def test_effort_reaches_openai_as_reasoning_effort(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    chat.reply(completion({"content": "done"}))
    async with serve(providers=[openai_for(chat, "openai-effort")]):
        task_id = await client.start("go", Options(provider="openai-effort", effort="low"), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    assert chat.seen[0].body["reasoning_effort"] == "low"
    assert "thinking" not in chat.seen[0].body  # Chat Completions has no such parameter


def test_thinking_and_effort_are_checked():
    with pytest.raises(ConfigurationError, match="effort must be one of"):
        Options(effort="extreme")
    with pytest.raises(ConfigurationError, match="budget_tokens"):
        Options(thinking={"type": "enabled"})
    with pytest.raises(ConfigurationError, match="thinking must be a mapping"):
        Options(thinking={"type": "sometimes"})
    with pytest.raises(ConfigurationError, match="provider_retries must be a whole number from 0 to 100, got -1"):
        Options(provider_retries=-1)
    assert Options(thinking={"type": "adaptive"}, effort="max").effort == "max"


_failures: dict[str, int] = {}


def flaky_then(answer: str, failures: int):
    """Fail ``failures`` times (retryable 503), then answer ``answer`` every time."""

    def respond(request):
        key = request.messages[0].text
        _failures[key] = _failures.get(key, 0) + 1
        if _failures[key] <= failures:
            raise ProviderError(provider="fake", message="overloaded", status=503, retryable=True, retry_after=0.01)
        return say(answer)

    return respond


async def test_validation_retries_are_counted_apart_from_provider_retries(client: AsyncClient, serve, task_queue):
    """max_retries is the seed's maxRetries (validation attempts); provider_retries bounds each
    model call's attempts on their own."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    provider = FakeLLMProvider(responder=flaky_then("not json", failures=2))
    async with serve(providers=[provider]):
        options = Options(provider=provider, output_schema=schema, max_retries=1, provider_retries=2)
        task_id = await client.start("validation-apart", options, task_queue=task_queue)
        with pytest.raises(AttemptsExhaustedError) as raised:
            await client.result(task_id)
    assert raised.value.attempts == 2  # the first answer and one validation retry
    # The first model call needed 3 attempts (2 provider retries) and did not use up validation's.
    assert len(provider.received_requests) == 3 + 1
    events = await client.events(task_id)
    assert [e.payload.attempt for e in events if e.type == "ProviderCallCompleted"] == [3, 1]


async def test_tool_retries_apply_to_tool_calls_only(client: AsyncClient, serve, task_queue):
    attempts: list[int] = []

    @tool(name="shaky", version="1", input_schema={"type": "object"}, description="Fails twice.")
    def shaky(arguments, ctx):
        from noeta.errors import ToolRetryableError

        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ToolRetryableError("not yet")
        return ToolResult(success=True, output="third time")

    from tests.support.scripts import call

    provider = FakeLLMProvider(responses=[call(("s1", "shaky", {})), say("ok")])
    async with serve(tools=[shaky], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[shaky], max_retries=0, tool_retries=2)
        task_id = await client.start("go", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "ok"
    assert attempts == [1, 2, 3]
