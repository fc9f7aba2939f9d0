"""FakeLLMProvider (scripted, thread-safe, responder outside the lock) and Usage arithmetic."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from noeta.protocols.messages import (
    LLMProvider,
    LLMRequest,
    LLMResponse,
    Message,
    TextBlock,
    Usage,
    registry_name,
)
from noeta.sdk.testing import FakeLLMProvider


def _request(i: int) -> LLMRequest:
    return LLMRequest(model="fake", messages=[Message(role="user", content=[TextBlock(text=f"q{i}")])])


def _response(i: int) -> LLMResponse:
    return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=f"a{i}")])


# --------------------------------------------------------------------------- FakeLLMProvider


def test_is_a_dataclass_with_documented_fields() -> None:
    assert dataclasses.is_dataclass(FakeLLMProvider)
    # The seed: "a dataclass with three fields".
    assert [f.name for f in dataclasses.fields(FakeLLMProvider)] == ["responses", "received_requests", "responder"]
    with pytest.raises(TypeError):
        FakeLLMProvider(name="other")  # type: ignore[call-arg]
    provider = FakeLLMProvider()
    assert provider.responses == []
    assert provider.received_requests == []
    assert provider.responder is None
    assert isinstance(provider, LLMProvider)
    assert registry_name(provider) == "FakeLLMProvider"


def test_defaults_are_not_shared_between_instances() -> None:
    a, b = FakeLLMProvider(), FakeLLMProvider()
    with pytest.raises(IndexError):
        a.complete(_request(0))
    assert len(a.received_requests) == 1
    assert b.received_requests == []


def test_responses_are_consumed_in_order_and_requests_recorded() -> None:
    responses = [_response(i) for i in range(3)]
    provider = FakeLLMProvider(responses=list(responses))
    requests = [_request(i) for i in range(3)]
    got = [provider.complete(r) for r in requests]
    assert got == responses
    assert all(g is r for g, r in zip(got, responses, strict=True))
    assert provider.received_requests == requests


def test_exhausted_script_raises_index_error_and_still_records_request() -> None:
    provider = FakeLLMProvider(responses=[_response(0)])
    assert provider.complete(_request(0)) == _response(0)
    with pytest.raises(IndexError, match="exhausted after 1 response"):
        provider.complete(_request(1))
    # Stays exhausted: no wrap-around, no repeat of the last response.
    with pytest.raises(IndexError):
        provider.complete(_request(2))
    assert provider.received_requests == [_request(0), _request(1), _request(2)]


def test_empty_script_raises_index_error() -> None:
    with pytest.raises(IndexError, match="exhausted after 0 response"):
        FakeLLMProvider().complete(_request(0))


def test_responder_answers_instead_of_script() -> None:
    provider = FakeLLMProvider(
        responses=[_response(99)],
        responder=lambda req: LLMResponse(stop_reason="end_turn", content=[TextBlock(text=req.messages[0].text.upper())]),
    )
    assert provider.complete(_request(1)).text == "Q1"
    assert provider.complete(_request(2)).text == "Q2"
    # The responder never runs out; the script is untouched.
    assert provider.received_requests == [_request(1), _request(2)]


def test_responder_exception_propagates_and_request_is_recorded() -> None:
    def boom(req: LLMRequest) -> LLMResponse:
        raise RuntimeError("provider down")

    provider = FakeLLMProvider(responder=boom)
    with pytest.raises(RuntimeError, match="provider down"):
        provider.complete(_request(0))
    assert provider.received_requests == [_request(0)]


def test_complete_is_thread_safe() -> None:
    n = 400
    responses = [_response(i) for i in range(n)]
    provider = FakeLLMProvider(responses=list(responses))
    requests = [_request(i) for i in range(n)]
    start = threading.Barrier(16, timeout=10)

    def worker(chunk: list[LLMRequest]) -> list[LLMResponse]:
        start.wait()
        return [provider.complete(r) for r in chunk]

    chunks = [requests[i::16] for i in range(16)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = [r for fut in [pool.submit(worker, c) for c in chunks] for r in fut.result(timeout=30)]

    # Every scripted response is returned exactly once (by identity).
    assert len(results) == n
    assert sorted(id(r) for r in results) == sorted(id(r) for r in responses)
    # Every request was recorded exactly once.
    assert len(provider.received_requests) == n
    assert sorted(id(r) for r in provider.received_requests) == sorted(id(r) for r in requests)
    # And the script is now exhausted.
    with pytest.raises(IndexError):
        provider.complete(_request(n))


def test_responder_runs_outside_the_lock() -> None:
    # Two concurrent calls must both be inside the responder at once to pass the barrier. If the
    # responder ran under the provider's lock the second call could not enter and the barrier
    # would time out (BrokenBarrierError) instead of hanging the test.
    barrier = threading.Barrier(2, timeout=5)

    def responder(req: LLMRequest) -> LLMResponse:
        barrier.wait()
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text="ok " + req.messages[0].text)])

    provider = FakeLLMProvider(responder=responder)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(provider.complete, _request(i)) for i in range(2)]
        texts = sorted(f.result(timeout=10).text for f in futures)
    assert texts == ["ok q0", "ok q1"]
    assert len(provider.received_requests) == 2


# --------------------------------------------------------------------------- Usage


def test_usage_input_is_sum_of_uncached_and_cache_tokens() -> None:
    u = Usage(uncached=100, cache_read=40, cache_write=7, output=0)
    assert u.input == 147


def test_usage_defaults_are_zero() -> None:
    u = Usage()
    assert (u.uncached, u.cache_read, u.cache_write, u.output, u.reasoning_tokens) == (0, 0, 0, 0, 0)
    assert u.input == 0
    assert u.visible_output == 0


@pytest.mark.parametrize(
    ("output", "reasoning", "visible"),
    [(100, 30, 70), (30, 30, 0), (10, 30, 0), (5, 0, 5)],
)
def test_usage_visible_output_is_output_minus_reasoning_floored_at_zero(
    output: int, reasoning: int, visible: int
) -> None:
    assert Usage(output=output, reasoning_tokens=reasoning).visible_output == visible


def test_usage_addition_is_fieldwise() -> None:
    a = Usage(uncached=1, cache_read=2, cache_write=3, output=4, reasoning_tokens=5)
    b = Usage(uncached=10, cache_read=20, cache_write=30, output=40, reasoning_tokens=50)
    total = a + b
    assert total == Usage(uncached=11, cache_read=22, cache_write=33, output=44, reasoning_tokens=55)
    assert total.input == 66
    assert total.visible_output == 0
    # Operands are untouched (frozen values) and zero is the identity.
    assert a == Usage(uncached=1, cache_read=2, cache_write=3, output=4, reasoning_tokens=5)
    assert a + Usage() == a
    assert sum([a, b, a], Usage()) == Usage(uncached=12, cache_read=24, cache_write=36, output=48, reasoning_tokens=60)


def test_usage_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Usage().output = 3  # type: ignore[misc]


def test_llm_response_text_concatenates_text_blocks() -> None:
    r = LLMResponse(stop_reason="end_turn", content=[TextBlock(text="a"), TextBlock(text="b")])
    assert r.text == "ab"
    assert r.usage == Usage()
