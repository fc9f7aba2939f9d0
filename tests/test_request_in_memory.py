"""A model call builds its request on the event loop when nothing it needs is outside this worker's
memory, and on an I/O thread when the content store must be read (a new worker, a stored tool
output, a system prompt not seen yet). Either way the request is the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from noeta.activities._services import WorkerServices
from noeta.activities.model_call import ModelCalls
from noeta.context.blob_cache import MAX_BODY_BYTES, BlobCache
from noeta.context.content_store import LocalContentStore
from noeta.context.transcript import TranscriptStore
from noeta.protocols.activity_io import CallModelInput
from noeta.protocols.messages import ContentRef, LLMResponse, Message, TextBlock, ToolResultBlock, Usage
from noeta.protocols.task import AttemptBudget
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry


class CountingStore(LocalContentStore):
    reads = 0

    def get(self, ref: ContentRef | str) -> bytes:
        self.reads += 1
        return super().get(ref)


def _activities(store: LocalContentStore, provider: FakeLLMProvider) -> tuple[ModelCalls, list[str]]:
    acts = ModelCalls(WorkerServices(Registry.of(providers=[provider], content_store=store)))
    trips: list[str] = []
    io = acts.services.io

    async def counted(fn: Any, *args: Any) -> Any:
        trips.append(fn.__name__)
        return await io(fn, *args)

    acts.services.io = counted  # type: ignore[method-assign]
    return acts, trips


def _answer(text: str) -> LLMResponse:
    return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=text)], usage=Usage(uncached=1, output=1))


def _output_seen(provider: FakeLLMProvider, call: int) -> object:
    block = provider.received_requests[call].messages[0].content[0]
    assert isinstance(block, ToolResultBlock)
    return block.output


def _call(head: ContentRef | None, append: list[Message], turn: int, system_ref: ContentRef | None) -> CallModelInput:
    return CallModelInput(
        task_id="t", provider="FakeLLMProvider", model=None, head=head, append=append, system_ref=system_ref,
        tools=[], turn=turn, budget=AttemptBudget(3), step_key=f"t/run/model-{turn}",
    )


async def test_request_is_built_on_the_loop_once_everything_is_in_memory(tmp_path: Path) -> None:
    store = LocalContentStore(tmp_path)
    provider = FakeLLMProvider(responses=[_answer("one"), _answer("two"), _answer("three")])
    acts, trips = _activities(store, provider)
    system = store.put(b"You are terse.")
    env = ActivityEnvironment()
    goal = Message(role="user", content=[TextBlock(text="go")], origin="human")

    first = await env.run(acts.call_model, _call(None, [goal], 1, system))
    assert trips == ["_build_request", "_record_response"]  # the system prompt was not read yet

    trips.clear()
    more = Message(role="user", content=[TextBlock(text="more")], origin="human")
    second = await env.run(acts.call_model, _call(first.head, [more], 2, system))
    assert trips == ["_record_response"]
    request = provider.received_requests[1]
    assert request.system == "You are terse."
    assert [m.text for m in request.messages] == ["go", "one", "more"]

    # A worker that has not seen the task reads its transcript back, off the loop, to the same request.
    fresh, fresh_trips = _activities(store, FakeLLMProvider(responses=[_answer("three")]))
    await env.run(fresh.call_model, _call(second.head, [], 3, system))
    assert fresh_trips == ["_build_request", "_record_response"]
    fresh_provider = fresh.registry.providers["FakeLLMProvider"]
    assert isinstance(fresh_provider, FakeLLMProvider)
    assert [m.text for m in fresh_provider.received_requests[0].messages] == ["go", "one", "more", "two"]


async def test_a_stored_tool_output_is_read_off_the_loop(tmp_path: Path) -> None:
    store = LocalContentStore(tmp_path)
    provider = FakeLLMProvider(responses=[_answer("seen"), _answer("again")])
    acts, trips = _activities(store, provider)
    output = store.put(b"a large tool output")
    results = Message(role="tool", content=[ToolResultBlock(call_id="c1", output=output, success=True)])
    env = ActivityEnvironment()

    first = await env.run(acts.call_model, _call(None, [results], 1, None))
    assert trips == ["_build_request", "_record_response"]
    assert _output_seen(provider, 0) == "a large tool output"

    trips.clear()  # the reference is in the cached transcript now: every later request resolves it
    await env.run(acts.call_model, _call(first.head, [], 2, None))
    assert trips == ["_build_request", "_record_response"]
    assert _output_seen(provider, 1) == "a large tool output"


def test_transcript_in_memory_only_when_cached_and_free_of_stored_bodies(tmp_path: Path) -> None:
    store = LocalContentStore(tmp_path)
    transcripts = TranscriptStore(store)
    plain = transcripts.append(None, [Message(role="user", content=[TextBlock(text="hi")], origin="human")])
    assert transcripts.in_memory(None) == ()
    assert transcripts.in_memory(plain) == (Message(role="user", content=[TextBlock(text="hi")], origin="human"),)
    assert TranscriptStore(store).in_memory(plain) is None  # another worker: not read yet

    ref = store.put(b"stored body")
    with_ref = transcripts.append(plain, [Message(role="tool", content=[ToolResultBlock("c1", ref, True)])])
    later = transcripts.append(with_ref, [Message(role="assistant", content=[TextBlock(text="ok")])])
    assert transcripts.in_memory(later) is None  # the reference is still in the chain
    reader = TranscriptStore(store)
    reader.load(later)  # read back: it finds the reference on the way
    assert reader.in_memory(later) is None
    reader.load(plain)
    assert reader.in_memory(plain) is not None


def test_blob_cache_reads_each_small_body_once(tmp_path: Path) -> None:
    store = CountingStore(tmp_path)
    small, large = store.put(b"prompt"), store.put(b"x" * (MAX_BODY_BYTES + 1))
    cache = BlobCache(store)
    assert cache.cached(small) is None
    assert cache.get(small) == b"prompt" and cache.get(small) == b"prompt"
    assert cache.cached(small) == b"prompt" and store.reads == 1
    cache.get(large)
    cache.get(large)
    assert cache.cached(large) is None and store.reads == 3  # too large to keep: read each time


def test_blob_cache_drops_the_least_recently_used_past_its_limit(tmp_path: Path) -> None:
    store = LocalContentStore(tmp_path)
    refs = [store.put(bytes([i]) * 100) for i in range(3)]
    cache = BlobCache(store, limit_bytes=250)
    cache.get(refs[0])
    cache.get(refs[1])
    cache.get(refs[0])  # used again: refs[1] is now the oldest
    cache.get(refs[2])
    assert [cache.cached(r) is not None for r in refs] == [True, False, True]

