"""Provider fallback (``Options.fallback_providers``): a call whose provider fails in a way another
may not share moves to the next provider, for that call and the rest of the task; each switch is a
ProviderFallback event; usage is kept per provider and model. Providers here are real HTTP servers
speaking OpenAI's Chat Completions protocol."""

from __future__ import annotations

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.client.task_input import Fallback
from noeta.errors import ConfigurationError, ProviderError, ProviderNotRegisteredError
from noeta.protocols.fallback import ProviderUsage, falls_back
from noeta.protocols.messages import Usage
from noeta.sdk._query import aquery
from noeta.sdk.testing import FakeLLMProvider
from tests.support.chat_server import FakeChatServer, completion, error_body, openai_for, running_chat_server
from tests.support.scripts import call, say
from tests.support.tools import add


def tool_call(call_id: str, a: int, b: int, prompt: int, out: int) -> dict:
    return completion(
        {"content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "add", "arguments": f'{{"a": {a}, "b": {b}}}'}},
        ]},
        finish_reason="tool_calls",
        usage={"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out},
    )


async def test_a_provider_down_past_its_retries_moves_the_task_to_the_fallback(
    client: AsyncClient, serve, task_queue, chat: FakeChatServer
):
    primary = openai_for(chat, "primary")
    chat.reply(tool_call("c1", 1, 2, prompt=10, out=3))
    for _ in range(2):  # the second call: every attempt answers 503 (max_retries=1: two attempts)
        chat.reply(error_body("upstream overloaded"), status=503, retry_after_ms="50")
    with running_chat_server() as other:
        backup = openai_for(other, "backup")
        other.reply(tool_call("c2", 3, 4, prompt=20, out=5))
        other.reply(completion({"content": "3 then 7"}, usage={"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}))
        options = Options(
            provider=primary, allowed_tools=[add], max_retries=1, fallback_providers=[Fallback(backup, model="gpt-backup")]
        )
        async with serve(tools=[add], providers=[primary, backup]):
            task_id = await client.start("add twice", options, task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "3 then 7")
    assert len(chat.seen) == 3  # one answer, then two refused attempts; never asked again
    assert [seen.body["model"] for seen in other.seen] == ["gpt-backup", "gpt-backup"]
    # The fallback got the whole conversation so far, the first provider's tool call included.
    assert [m["role"] for m in other.seen[0].body["messages"]] == ["user", "assistant", "tool"]

    events = await client.events(task_id)
    [fallback] = [e for e in events if e.type == "ProviderFallback"]
    payload = fallback.payload
    assert (payload.from_provider, payload.from_model, payload.to_provider, payload.to_model) == (
        "primary", None, "backup", "gpt-backup"
    )
    assert payload.error_type == "AttemptsExhaustedError" and "upstream overloaded" in payload.error
    assert payload.turn == 2
    # Usage split by provider and model; together they are the task's usage.
    assert result.usage_by_provider == [
        ProviderUsage("primary", None, Usage(uncached=10, output=3), 1),
        ProviderUsage("backup", "gpt-backup", Usage(uncached=50, output=12), 2),
    ]
    assert result.usage == Usage(uncached=60, output=15)
    completed = [e.payload for e in events if e.type == "ProviderCallCompleted"]
    assert [c.provider for c in completed] == ["primary", "backup", "backup"]


async def test_a_bad_request_does_not_move_to_the_fallback(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    for _ in range(4):  # the same answer should a loaded machine lose an attempt and try again
        chat.reply(error_body("messages: must not be empty"), status=400)
    primary, backup = openai_for(chat, "primary"), FakeLLMProvider(responses=[say("never")])
    async with serve(providers=[primary, backup]):
        task_id = await client.start(
            "hi", Options(provider=primary, fallback_providers=[backup]), task_queue=task_queue
        )
        with pytest.raises(ProviderError) as info:
            await client.result(task_id)
    assert info.value.status == 400
    assert backup.received_requests == []
    assert not [e for e in await client.events(task_id) if e.type == "ProviderFallback"]


async def test_an_unregistered_fallback_fails_the_task_before_its_first_model_call(
    client: AsyncClient, serve, task_queue
):
    primary = FakeLLMProvider(responses=[say("never")])
    async with serve(providers=[primary]):
        task_id = await client.start(
            "hi", Options(provider=primary, fallback_providers=["nowhere"]), task_queue=task_queue
        )
        with pytest.raises(ProviderNotRegisteredError, match="fallback provider\\(s\\) 'nowhere' not registered"):
            await client.result(task_id)
    assert primary.received_requests == []  # no token spent


async def test_query_refuses_an_unknown_fallback_name_before_the_task_starts(host: HostConfig):
    primary = FakeLLMProvider(responses=[say("never")])
    with pytest.raises(ProviderNotRegisteredError, match="fallback provider 'nowhere' is neither given as an object"):
        await aquery(Options(provider=primary, fallback_providers=["nowhere"]), goal="hi", host=host)
    assert primary.received_requests == []


@pytest.mark.parametrize("value", ["openai", [3], [Fallback("")], [Fallback("openai", model="")]])
def test_malformed_fallback_providers_are_refused_when_options_are_built(value):
    with pytest.raises(ConfigurationError, match="fallback_providers"):
        Options(fallback_providers=value)


@pytest.mark.parametrize(
    ("error_type", "details", "moves"),
    [
        ("AttemptsExhaustedError", {"last_failure_type": "provider"}, True),
        ("AttemptsExhaustedError", {"last_failure_type": "rate_limit"}, True),
        ("ContextLengthError", {"status": 400}, True),
        ("ProviderNotRegisteredError", {}, True),
        ("ProviderError", {"status": 401}, True),
        ("ProviderError", {"status": 404}, True),
        ("ProviderError", {"status": 529}, True),
        ("ProviderError", {"status": 400}, False),
        ("ProviderError", {"status": 422}, False),
        ("ProviderError", {"status": None}, False),
        ("ContentStoreError", {}, False),
        ("BudgetExceededError", {}, False),
    ],
)
def test_which_failures_move_to_the_next_provider(error_type, details, moves):
    assert falls_back(error_type, details) is moves


def _up_then_down(request):
    if any(getattr(b, "type", "") == "tool_result" for m in request.messages for b in m.content):
        raise ProviderError(provider="primary", message="overloaded", status=503, retryable=True, retry_after=0.05)
    return call(("c0", "add", {"a": 0, "b": 1}))


def _count_to_six(request):
    done = sum(1 for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result")
    return call((f"c{done}", "add", {"a": done, "b": 1})) if done < 6 else say(f"counted to {done}")


async def test_the_task_stays_on_its_fallback_provider_across_continue_as_new(client: AsyncClient, serve, task_queue):
    primary, backup = FakeLLMProvider(responder=_up_then_down), FakeLLMProvider(responder=_count_to_six)
    options = Options(
        provider="primary", allowed_tools=[add], max_retries=1, max_history_events=30,
        fallback_providers=[Fallback("backup", model="backup-model")],
    )
    async with serve(tools=[add], providers={"primary": primary, "backup": backup}):
        task_id = await client.start("count", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "counted to 6"
    events = await client.events(task_id)
    assert any(e.type == "TaskContinuedAsNew" for e in events)
    assert len([e for e in events if e.type == "ProviderFallback"]) == 1
    assert len(primary.received_requests) == 3  # its answer, then two failed attempts; never again
    assert [(u.provider, u.model, u.model_calls) for u in result.usage_by_provider] == [
        ("primary", None, 1), ("backup", "backup-model", 6)
    ]


async def test_a_task_whose_provider_never_fails_records_the_same_history_with_or_without_fallbacks(
    client: AsyncClient, serve, task_queue
):
    def script(request):
        done = any(getattr(b, "type", "") == "tool_result" for m in request.messages for b in m.content)
        return say("3") if done else call(("c1", "add", {"a": 1, "b": 2}))

    primary, backup = FakeLLMProvider(responder=script), FakeLLMProvider(responses=[])
    shapes = []
    async with serve(tools=[add], providers={"primary": primary, "backup": backup}):
        for fallbacks in ([], ["backup"]):
            options = Options(provider="primary", allowed_tools=[add], fallback_providers=fallbacks)
            task_id = await client.start("add", options, task_queue=task_queue)
            assert (await client.result(task_id)).answer == "3"
            history = await client.temporal.get_workflow_handle(task_id).fetch_history()
            shapes.append([(e.event_type, e.marker_recorded_event_attributes.marker_name) for e in history.events])
    assert shapes[0] == shapes[1]  # no patch marker, no memo, no other command
    assert backup.received_requests == []


def test_fallback_providers_over_http_are_names_with_models():
    from noeta.http.models import StartTask

    body = StartTask.model_validate(
        {"goal": "x", "options": {"fallback_providers": [{"provider": "backup", "model": "m"}, {"provider": "local"}]}}
    )
    assert body.options is not None
    assert body.options.to_options().fallback_providers == [Fallback("backup", "m"), Fallback("local")]


async def test_a_request_too_long_moves_to_the_next_provider_with_a_larger_window(client: AsyncClient, serve, task_queue):
    from noeta.errors import ContextLengthError

    def too_long(request):
        raise ContextLengthError(provider="primary", message="prompt is too long", status=400)

    primary, small, big = FakeLLMProvider(responder=too_long), FakeLLMProvider(responses=[]), FakeLLMProvider(
        responses=[say("fits here")]
    )
    options = Options(
        provider="primary", model="gpt-4o", compaction=None,  # 128k; no compaction: straight to the fallback
        fallback_providers=[Fallback("small", model="gpt-4"), Fallback("big", model="gpt-4.1")],  # 8k, 1M
    )
    async with serve(providers={"primary": primary, "small": small, "big": big}):
        task_id = await client.start("hi", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "fits here"
    assert small.received_requests == [] and big.received_requests[0].model == "gpt-4.1"
    [moved] = [e.payload for e in await client.events(task_id) if e.type == "ProviderFallback"]
    assert (moved.error_type, moved.to_provider, moved.to_model) == ("ContextLengthError", "big", "gpt-4.1")
