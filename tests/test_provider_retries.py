"""Provider failures inside a task, over real HTTP: retry-after is honoured, 4xx is not retried."""

from __future__ import annotations

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import AttemptsExhaustedError, ProviderError
from tests.support.chat_server import (
    FakeChatServer,
    completion,
    error_body,
    openai_for,
)


def provider_for(server: FakeChatServer):
    return openai_for(server, "openai-local")


async def test_429_retry_after_is_honoured(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    chat.reply(error_body("Rate limit reached"), status=429, retry_after="2")
    chat.reply(completion({"content": "fine now"}))
    provider = provider_for(chat)
    async with serve(providers=[provider]):
        task_id = await client.start("hi", Options(provider=provider), task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "fine now"
    first, second = chat.seen
    assert second.at - first.at >= 2.0  # not before the provider said so (backoff alone is 1 s)
    [retried] = [e.payload for e in await client.events(task_id) if e.type == "ProviderCallRetried"]
    assert (retried.attempt, retried.error_type, retried.retry_after) == (1, "ProviderError", 2.0)
    assert "HTTP 429" in retried.error and "Rate limit reached" in retried.error
    [completed] = [e.payload for e in await client.events(task_id) if e.type == "ProviderCallCompleted"]
    assert completed.attempt == 2


async def test_400_fails_at_once_with_a_clear_message(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    chat.reply(error_body("messages: must not be empty"), status=400)
    provider = provider_for(chat)
    async with serve(providers=[provider]):
        task_id = await client.start("hi", Options(provider=provider, max_retries=3), task_queue=task_queue)
        with pytest.raises(ProviderError) as info:
            await client.result(task_id)
    assert str(info.value) == "provider 'openai-local' (HTTP 400): messages: must not be empty"
    assert (info.value.status, info.value.retryable) == (400, False)
    assert len(chat.seen) == 1


async def test_5xx_until_exhausted_lists_every_attempt(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    for status in (503, 500, 502):
        chat.reply(error_body(f"upstream {status}"), status=status, retry_after_ms="50")
    provider = provider_for(chat)
    async with serve(providers=[provider]):
        task_id = await client.start("hi", Options(provider=provider, max_retries=2), task_queue=task_queue)
        with pytest.raises(AttemptsExhaustedError) as info:
            await client.result(task_id)
    err = info.value
    assert (err.attempts, err.last_failure_type) == (3, "provider")
    assert err.issues == [f"provider 'openai-local' (HTTP {s}): upstream {s}" for s in (503, 500, 502)]
    types = [e.type for e in await client.events(task_id)]
    assert types[-6:] == [
        "ProviderCallStarted", "ProviderCallRetried", "ProviderCallRetried", "ProviderCallFailed",
        "AttemptsExhausted", "TaskFailed",
    ]
