"""Streamed model calls through Temporal's Workflow Streams: what they add to history, how long a
piece takes from the provider to a client, and what a reader sees across continue-as-new.

    python bench/streams.py [--calls 20] [--pieces 40] [--piece-chars 12] [--piece-seconds 0.03]
    python bench/streams.py --record tests/histories/workflow-streams     # also write the histories

One embedded dev server, one in-process worker, a provider that streams each model call as
PIECES pieces of PIECE_CHARS characters, PIECE_SECONDS apart (a tool call each turn, then an
answer). Scenarios, each one task of CALLS model calls:

- ``off``: NOETA_WORKFLOW_STREAM=0, the baseline; the provider streams to a worker-side sink that
  drops the pieces (the same call path, nothing published);
- ``nobody``: streams on, nobody reads (the batches are published all the same);
- ``listener``: streams on, a second client reads Client.deltas(task_id) from the start;
- ``listener-0.5s``: as ``listener``, with NOETA_STREAM_FIRST_BATCH=0.5 (the first batch 0.5 s after
  the call's first piece, not 1.5 s; the variable, if set, applies to the other scenarios);
- ``listener-before``: as ``listener``, published as activities did before ``noeta.stream_batch``
  (the stream's own publish signal, the item base64-encoded; first batch at 0.5 s), the baseline
  of the compact batches, in the same run;
- ``continue-as-new``: as ``listener``, with max_history_events low enough that the task continues
  as new every few calls;
- ``update-poll`` (the alternative not chosen): the reader is the stream's own subscriber
  (``WorkflowStreamClient.subscribe``, a long-polling update per read);
- ``redis`` (with ``--redis URL``, the broker option): worker and reader use Redis pub/sub.

Per scenario: history events and bytes per model call, the bytes each call adds over ``off``, the
publish signals per call, the pieces received out of those streamed, and (with a reader) the
latency from the provider handing a piece over to the reader's iterator yielding it (same process,
one clock). Counts are stable; timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient

import noeta.activities._streaming as streaming
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.deltas.broker import FIRST_BATCH_VARIABLE, WORKFLOW_STREAM_VARIABLE
from noeta.protocols.messages import LLMRequest, LLMResponse, StreamDelta, TextBlock, ToolUseBlock, Usage
from noeta.deltas.broker import broker_for
from noeta.client.stream_reader import call_deltas
from noeta.deltas.workflow_stream import CallPublisher
from noeta.protocols.stream_batches import CallPieces, item_json, item_pieces
from noeta.protocols.names import SIGNAL_STREAM_BATCH, SIGNAL_STREAM_LISTEN, WORKFLOW_STREAM_PUBLISH
from noeta.protocols.tool import ToolResult
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker

from embedded import embedded_server, host_at  # bench/, beside this script


@tool(name="note", version="1", input_schema={"type": "object"}, description="Take a note.")
def note(arguments, ctx):
    return ToolResult(success=True, output="noted")


class Streamer:
    """Streams each call's text piece by piece; remembers when each piece was handed over."""

    name = "streamer"

    def __init__(self, calls: int, pieces: int, chars: int, seconds: float) -> None:
        self.calls, self.pieces, self.chars, self.seconds = calls, pieces, chars, seconds
        self.emitted: dict[str, float] = {}

    def _turn(self, request: LLMRequest) -> int:
        return sum(1 for m in request.messages if m.role == "assistant")

    def _texts(self, turn: int) -> list[str]:
        return [f"{turn:03d}.{i:04d}".ljust(self.chars, "~") for i in range(self.pieces)]

    def _response(self, turn: int, text: str) -> LLMResponse:
        if turn + 1 < self.calls:
            return LLMResponse(
                stop_reason="tool_use", usage=Usage(uncached=100, output=self.pieces),
                content=[TextBlock(text=text), ToolUseBlock(call_id=f"c{turn}", tool_name="note", arguments={})],
            )
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=text)], usage=Usage(output=self.pieces))

    def complete(self, request: LLMRequest) -> LLMResponse:
        turn = self._turn(request)
        return self._response(turn, "".join(self._texts(turn)))

    async def stream(self, request: LLMRequest, on_delta) -> LLMResponse:
        turn = self._turn(request)
        texts = self._texts(turn)
        for text in texts:
            await asyncio.sleep(self.seconds)
            self.emitted[text] = time.monotonic()
            on_delta("text", text)
        return self._response(turn, "".join(texts))


class PublisherBefore(CallPublisher):
    """What the model-call activity sent before ``noeta.stream_batch``: the stream's own publish
    signal, each item a base64-encoded payload in a JSON list (the workflow still takes it)."""

    def __init__(self, temporal, task_id: str, run_id: str, call_id: str, attempt: int, first_batch: float) -> None:
        super().__init__(temporal, task_id, run_id, call_id, attempt, first_batch)
        self._before = WorkflowStreamClient(self._handle, client=temporal, batch_interval=timedelta(days=1))
        self._topic = self._before.topic(f"{call_id}#{attempt}")

    async def _publish(self, end: bool) -> None:
        pieces = self._pieces[self._sent:]
        if pieces:
            data = item_json(CallPieces(self._call_id, self._attempt, self._sent, pieces, end=end))
            self._topic.publish(Payload(metadata={"encoding": b"json/plain"}, data=data))
            self._sent += len(pieces)
            self.batches += 1
        await self._before.flush()


def call_durations(events: list) -> list[float]:
    """Milliseconds from each model call's start to its completion, within one run's events."""
    by_id = {e.event_id: e for e in events}
    out = []
    for e in events:
        if e.HasField("activity_task_completed_event_attributes"):
            done = e.activity_task_completed_event_attributes
            if by_id[done.scheduled_event_id].activity_task_scheduled_event_attributes.activity_type.name == "noeta.call_model":
                out.append((e.event_time.ToMicroseconds() - by_id[done.started_event_id].event_time.ToMicroseconds()) / 1000)
    return out


async def histories(client: AsyncClient, task_id: str) -> list:
    """Every run's history of the task, first run first (continue-as-new starts a new run)."""
    runs, run_id = [], (await client.temporal.get_workflow_handle(task_id).describe()).raw_description.workflow_execution_info.first_run_id
    while run_id:
        history = await client.temporal.get_workflow_handle(task_id, run_id=run_id).fetch_history()
        runs.append(history)
        run_id = history.events[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id or None
    return runs


async def scenario(
    name: str, client: AsyncClient, reader: AsyncClient, store, args: argparse.Namespace, record: Path | None
) -> dict:
    os.environ[WORKFLOW_STREAM_VARIABLE] = "0" if name == "off" else "1"
    first_batch = os.environ.get(FIRST_BATCH_VARIABLE)
    if name in ("listener-0.5s", "listener-before"):  # read by the worker built below
        os.environ[FIRST_BATCH_VARIABLE] = "0.5"
    streaming.CallPublisher = PublisherBefore if name == "listener-before" else CallPublisher  # type: ignore[misc]
    provider = Streamer(args.calls, args.pieces, args.piece_chars, args.piece_seconds)
    registry = Registry.of(providers=[provider], tools=[note], content_store=store)
    if name == "off":
        registry.delta_sink = lambda delta: None  # streamed, published nowhere
    if name == "redis":
        registry.delta_broker = broker_for(args.redis)
        reader = AsyncClient(reader.temporal, content_store=store, task_queue="unused", delta_broker=broker_for(args.redis))
    queue = f"bench-streams-{uuid.uuid4().hex[:8]}"
    options = Options(provider="streamer", allowed_tools=[note], max_turns=args.calls + 1)
    if name == "continue-as-new":
        options = Options(provider="streamer", allowed_tools=[note], max_turns=args.calls + 1, max_history_events=60)
    received: list[tuple[StreamDelta, float]] = []
    async with build_worker(client.temporal, registry, queue):
        task_id = f"streams-{name}-{uuid.uuid4().hex[:6]}"
        stream = None
        if name in ("listener", "listener-0.5s", "listener-before", "continue-as-new", "redis"):
            stream = await reader.deltas(task_id)  # waits for the task to exist, then follows its history

        async def read() -> None:
            assert stream is not None
            async for delta in stream:
                received.append((delta, time.monotonic()))

        async def read_by_update() -> None:
            await reader.temporal.get_workflow_handle(task_id).signal(SIGNAL_STREAM_LISTEN, 3600.0)
            subscriber = WorkflowStreamClient.create(reader.temporal, task_id)
            async for item in subscriber.subscribe(result_type=RawValue):
                for delta in call_deltas(task_id, item_pieces(item.data.payload.data), item.offset):
                    received.append((delta, time.monotonic()))

        reading = asyncio.ensure_future(read()) if stream is not None else None
        await client.start("take notes", options, task_id=task_id, task_queue=queue)
        if name == "update-poll":
            reading = asyncio.ensure_future(read_by_update())
        await client.result(task_id)
        if name == "redis":  # pub/sub never ends by itself: wait for the last piece, then close
            deadline = time.monotonic() + 60
            while len(received) < len(provider.emitted) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await stream.close()
            reading.cancel()
        elif reading is not None:  # each reader stops once the task has ended and its stream is read
            await asyncio.wait_for(reading, 120)
    os.environ.pop(FIRST_BATCH_VARIABLE, None)
    if first_batch is not None:
        os.environ[FIRST_BATCH_VARIABLE] = first_batch
    streaming.CallPublisher = CallPublisher  # type: ignore[misc]
    runs = await histories(client, task_id)
    events = [e for run in runs for e in run.events]
    calls = sum(1 for e in events if e.HasField("activity_task_scheduled_event_attributes")
                and e.activity_task_scheduled_event_attributes.activity_type.name == "noeta.call_model")
    signals = sum(1 for e in events if e.HasField("workflow_execution_signaled_event_attributes")
                  and e.workflow_execution_signaled_event_attributes.signal_name in (SIGNAL_STREAM_BATCH, WORKFLOW_STREAM_PUBLISH))
    latencies = sorted(1000 * (at - provider.emitted[d.text]) for d, at in received if d.text in provider.emitted)
    offsets = [d.offset for d, _ in received]
    durations = sorted(d for run in runs for d in call_durations(run.events))
    if record is not None and name in ("listener", "continue-as-new"):
        record.mkdir(parents=True, exist_ok=True)
        for number, run in enumerate(runs, start=1):
            stem = "streamed" if name == "listener" else f"streamed_continue_as_new.run{number}"
            (record / f"{stem}.json").write_text(run.to_json())
    return {
        "name": name, "runs": len(runs), "calls": calls, "events": len(events),
        "bytes": sum(e.ByteSize() for e in events), "signals": signals,
        "streamed": len(provider.emitted), "received": len(received),
        "in_order": "–" if None in offsets else offsets == sorted(offsets),
        "call_ms": statistics.median(durations) if durations else None,
        "p50": statistics.median(latencies) if latencies else None,
        "p95": latencies[int(0.95 * (len(latencies) - 1))] if latencies else None,
    }


async def main(args: argparse.Namespace) -> None:
    with embedded_server() as (address, home):
        host = host_at(address, home)
        client = await AsyncClient.connect(host)
        reader = await AsyncClient.connect(host)
        print(f"# {platform.node()} · {platform.machine()} · {os.cpu_count()} cores · Python "
              f"{platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')}")
        print(f"# {args.calls} model calls per task, {args.pieces} pieces of {args.piece_chars} chars "
              f"{args.piece_seconds * 1000:.0f} ms apart ({args.pieces * args.piece_chars} chars a call)")
        print("| scenario | runs | events / call | history bytes / call | added over off / call | publish signals / call | model call ms p50 | pieces received / streamed | offsets in order | latency p50 / p95 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        base = None
        names = ["off", "nobody", "listener", "listener-0.5s", "listener-before", "continue-as-new", "update-poll"]
        names += ["redis"] if args.redis else []
        names = [n for n in names if n == "off" or not args.scenarios or n in args.scenarios.split(",")]
        for name in names:
            r = await scenario(name, client, reader, host.store(), args, args.record)
            per_call = r["bytes"] / r["calls"]
            base = per_call if base is None else base
            latency = "–" if r["p50"] is None else f"{r['p50']:.0f} / {r['p95']:.0f}"
            print(f"| {name} | {r['runs']} | {r['events'] / r['calls']:.1f} | {per_call:,.0f} | {per_call - base:+,.0f} | "
                  f"{r['signals'] / r['calls']:.2f} | {r['call_ms']:.0f} | {r['received']} / {r['streamed'] if r['received'] else '–'} | "
                  f"{r['in_order'] if r['received'] else '–'} | {latency} |", flush=True)
        await reader.close()
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--piece-chars", type=int, default=12)
    parser.add_argument("--piece-seconds", type=float, default=0.03)
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--redis", default=None, help="redis:// URL: also measure the Redis broker")
    parser.add_argument("--scenarios", default="", help="comma-separated scenarios to run after off (default: all)")
    asyncio.run(main(parser.parse_args()))
