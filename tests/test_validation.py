"""Structured output and validators: the seed's expect_validator semantics on the real server."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from noeta.client.client import AsyncClient
from noeta.client.messages import InjectedMessage, Result
from noeta.client.options import HostConfig, Options
from noeta.errors import (
    AttemptsExhaustedError,
    TaskFailedError,
    ValidatorNotRegisteredError,
)
from noeta.protocols.validation import expect_validator
from noeta.sdk._query import aquery
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import say


class Quote(BaseModel):
    sku: str
    price: float
    is_vip: bool = False


def quote_rules(data: Quote) -> bool | str:
    if data.price < 0:
        return "价格不能为负数，请修正"
    if data.price > 10000 and not data.is_vip:
        return "非 VIP 用户单价不能超过 10000"
    return True


QUOTE_VALIDATOR = expect_validator(Quote, quote_rules)


def quote(price: float, **extra) -> str:
    return json.dumps({"sku": "A-1", "price": price, **extra})


def last_text(request) -> str:
    return request.messages[-1].text


async def test_string_verdict_reprompts_once_with_that_message(host: HostConfig):
    provider = FakeLLMProvider(responses=[say(quote(-5)), say(quote(12.5))])
    result = await aquery(
        Options(output_schema=Quote, validators=[QUOTE_VALIDATOR]), goal="quote A-1", provider=provider, host=host
    )
    assert len(provider.received_requests) == 2
    assert "价格不能为负数，请修正" in last_text(provider.received_requests[1])
    assert result.data == Quote(sku="A-1", price=12.5)
    assert provider.received_requests[0].output_schema == Quote.model_json_schema()
    items = result.messages()
    assert [i for i in items if isinstance(i, InjectedMessage)] == [
        InjectedMessage("Your answer was rejected: 价格不能为负数，请修正\nAnswer again, fixing this.", "system")
    ]
    assert [e.type for e in result.events].count("ValidationFailed") == 1


async def test_false_verdict_uses_the_default_message(host: HostConfig):
    calls = []

    async def only_second(data: str) -> bool:  # async, and no output schema: data is the text
        calls.append(data)
        return len(calls) > 1

    provider = FakeLLMProvider(responses=[say("first"), say("second")])
    result = await aquery(Options(validators=[expect_validator(only_second)]), goal="g", provider=provider, host=host)
    assert result.answer() == "second" and calls == ["first", "second"]
    assert "Validation failed" in last_text(provider.received_requests[1])


async def test_attempts_exhausted_after_max_retries(host: HostConfig):
    provider = FakeLLMProvider(responses=[say(quote(-1)), say(quote(20000)), say(quote(-2))])
    with pytest.raises(AttemptsExhaustedError) as info:
        await aquery(
            Options(output_schema=Quote, validators=[QUOTE_VALIDATOR], max_retries=2),
            goal="quote",
            provider=provider,
            host=host,
        )
    err = info.value
    assert "All attempts exhausted" in str(err)
    assert err.attempts == 3 and len(provider.received_requests) == 3
    assert err.issues == ["价格不能为负数，请修正", "非 VIP 用户单价不能超过 10000", "价格不能为负数，请修正"]
    assert err.last_failure_type == "validator"
    assert err.last_data == {"sku": "A-1", "price": -2.0, "is_vip": False}
    assert err.last_raw_text == quote(-2)


async def test_schema_failures_share_the_budget_and_report_schema(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("not json"), say('{"sku": "A-1"}')])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "quote", Options(provider=provider, output_schema=Quote, max_retries=1), task_queue=task_queue
        )
        with pytest.raises(AttemptsExhaustedError) as info:
            await client.result(task_id)
    err = info.value
    assert (err.attempts, err.last_failure_type, err.last_raw_text) == (2, "schema", '{"sku": "A-1"}')
    assert err.issues[0].startswith("The answer must be a JSON document matching the output schema")
    assert "price" in err.issues[1]  # without the model class the worker checks the JSON Schema
    assert err.last_data == {"sku": "A-1"}
    envelopes = await client.events(task_id)
    assert [e.type for e in envelopes if e.type in ("ValidationFailed", "AttemptsExhausted", "TaskFailed")] == [
        "ValidationFailed", "ValidationFailed", "AttemptsExhausted", "TaskFailed",
    ]
    assert (await client.messages(task_id))[-1].status == "failed"


async def test_json_schema_dict_gives_dict_data_and_fenced_json_is_accepted(host: HostConfig):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    provider = FakeLLMProvider(responses=[say('```json\n{"n": 42}\n```')])
    result = await aquery(Options(output_schema=schema), goal="n?", provider=provider, host=host)
    assert result.data == {"n": 42} and result.messages()[-1] == Result('```json\n{"n": 42}\n```', "completed")


async def test_a_raising_validator_fails_the_task_not_the_model(host: HostConfig):
    def broken(data):
        raise RuntimeError("database unreachable")

    provider = FakeLLMProvider(responses=[say("x")])
    with pytest.raises(TaskFailedError, match="database unreachable"):
        await aquery(Options(validators=[broken], max_retries=0), goal="g", provider=provider, host=host)
    assert len(provider.received_requests) == 1


async def test_validator_missing_on_the_worker_fails_before_any_model_call(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("x")])
    async with serve(providers=[provider]):
        task_id = await client.start("g", Options(provider=provider, validators=[quote_rules]), task_queue=task_queue)
        with pytest.raises(ValidatorNotRegisteredError, match="quote_rules"):
            await client.result(task_id)
    assert provider.received_requests == []
