"""Where a step's worker CPU goes, measured in one process without a server.

Two halves of a step, each for Noeta and for the floor (bench/baseline_*.py):

- ``activities``: the bench's 5-step task driven through its activities in an ActivityEnvironment,
  each input and output encoded and decoded as Temporal does. Noeta's side runs the real
  call_model / invoke_tool on a content store in a temp directory; ``--inline-io`` also runs their
  content-store work on the event loop instead of the I/O threads (a diagnostic: what the trips to
  the threads cost).
- ``replay``: histories written by ``bench/concurrency.py --dump-histories DIR`` replayed with each
  system's workflow (the floor's in the sandbox, as its worker runs it): the workflow side of a
  task, SDK core included.

- ``trips``: a trip to a thread and back, Noeta's pool against the stdlib's executor.

Prints CPU (user + system) per step, per task or per trip; nothing here is a timed test::

    python bench/step_cost.py activities --tasks 300
    python bench/step_cost.py trips
    python bench/concurrency.py --agents 1 --steps 50 --dump-histories /tmp/h && python bench/step_cost.py replay /tmp/h
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from temporalio.client import WorkflowHistory  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402
from temporalio.worker import Replayer  # noqa: E402

STEPS = 5
RUN_ID = "01a231ba-0e13-771b-862c-1cedbcc6c1bd"  # a run id's length: keys as long as a worker's


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


async def per_unit(run_one: Callable[[int], Awaitable[None]], count: int, warm_up: int = 20) -> float:
    """CPU seconds per call of ``run_one`` over ``count`` calls, after ``warm_up`` unmeasured ones."""
    for i in range(warm_up):
        await run_one(i)
    start = cpu_seconds()
    for i in range(count):
        await run_one(warm_up + i)
    return (cpu_seconds() - start) / count


def round_trip(converter: Any, value: Any, kind: type) -> Any:
    """``value`` encoded and decoded as ``kind`` by ``converter``, as between a workflow and an activity."""
    return converter.from_payloads(converter.to_payloads([value]), [kind])[0]


def environment() -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, start_to_close_timeout=timedelta(seconds=300))
    return env


def noeta_task(store_dir: str, inline_io: bool) -> Callable[[int], Awaitable[None]]:
    from scripted_agent import ScriptedProvider, bench_output
    from workload import PROVIDER_NAME, goal_for

    from noeta.activities.agent import AgentActivities
    from noeta.context.content_store import LocalContentStore
    from noeta.temporal.converter import data_converter
    from noeta.protocols.activity_io import CallModelInput, CallModelOutput, InvokeToolInput, InvokeToolOutput
    from noeta.protocols.appends import tool_result_block, tool_round_message
    from noeta.protocols.messages import Message, TextBlock, ToolUseBlock
    from noeta.protocols.task import AttemptBudget
    from noeta.worker import Registry

    registry = Registry.of(tools=[bench_output], providers=[ScriptedProvider()], content_store=LocalContentStore(store_dir))
    acts = AgentActivities(registry)
    if inline_io:
        async def on_the_loop(fn: Any, *args: Any) -> Any:
            return fn(*args)

        acts.services.io = on_the_loop  # type: ignore[method-assign]
    converter = data_converter().payload_converter
    env = environment()
    fingerprint = registry.tool_spec(bench_output.name).fingerprint

    through_temporal = functools.partial(round_trip, converter)

    async def run_task(n: int) -> None:
        task_id = f"bench-{n}"
        head = None
        pending = [Message(role="user", content=[TextBlock(text=goal_for(STEPS, 200))], origin="human")]
        turn = calls = 0
        while True:
            turn += 1
            request = CallModelInput(
                task_id=task_id, provider=PROVIDER_NAME, model=None, head=head, append=pending, system_ref=None,
                tools=[bench_output.name], turn=turn, budget=AttemptBudget(3), step_key=f"{task_id}/{RUN_ID}/model-{turn}",
            )
            out = await env.run(acts.model_calls.call_model, through_temporal(request, CallModelInput))
            out = through_temporal(out, CallModelOutput)
            head = out.head
            uses = [b for b in out.response.content if isinstance(b, ToolUseBlock)]
            if not uses:
                return
            blocks = []
            for use in uses:
                calls += 1
                call = InvokeToolInput(
                    task_id=task_id, call_id=use.call_id, tool_name=use.tool_name, arguments=use.arguments,
                    expected_fingerprint=fingerprint, budget=AttemptBudget(3), idempotency_key=f"{task_id}/{RUN_ID}/{calls}",
                )
                result = await env.run(acts.tool_calls.invoke_tool, through_temporal(call, InvokeToolInput))
                blocks.append(tool_result_block(use.call_id, through_temporal(result, InvokeToolOutput).result))
            pending = [tool_round_message(blocks)]

    return run_task


def floor_task() -> Callable[[int], Awaitable[None]]:
    from baseline_activities import ModelInput, ModelReply, ToolInput, model, tool

    converter = pydantic_data_converter.payload_converter
    env = environment()

    through_temporal = functools.partial(round_trip, converter)

    async def run_task(n: int) -> None:
        done = 0
        while True:
            inp = through_temporal(ModelInput(f"bench-{n}", STEPS, done, 200), ModelInput)
            reply = through_temporal(await env.run(model, inp), ModelReply)
            if reply.tool_call is None:
                return
            call = through_temporal(ToolInput(f"bench-{n}", reply.tool_call), ToolInput)
            through_temporal(await env.run(tool, call), str)
            done += 1

    return run_task


async def activities(args: argparse.Namespace) -> None:
    print(f"# python bench/step_cost.py activities --tasks {args.tasks}: {STEPS}-step tasks, 200-byte tool outputs")
    with tempfile.TemporaryDirectory() as store_dir:
        rows = [
            ("floor", floor_task()),
            ("noeta", noeta_task(store_dir + "/threads", inline_io=False)),
            ("noeta, store work on the loop", noeta_task(store_dir + "/inline", inline_io=True)),
        ]
        for name, run_task in rows:
            seconds = await per_unit(run_task, args.tasks)
            print(f"  {name}: {seconds / STEPS * 1e3:.3f} ms CPU per step (activity bodies and payload round trips)")


async def replay(args: argparse.Namespace) -> None:
    from baseline_loop import BaselineLoop

    from noeta.worker.plugin import NoetaPlugin
    from noeta.workflows import WORKFLOWS

    print(f"# python bench/step_cost.py replay {args.histories} --times {args.times}")
    replayers = {
        "floor": Replayer(workflows=[BaselineLoop], data_converter=pydantic_data_converter),
        "noeta": Replayer(workflows=list(WORKFLOWS), plugins=[NoetaPlugin()]),
    }
    for name, replayer in replayers.items():
        path = Path(args.histories) / f"{'baseline' if name == 'floor' else name}.json"
        history = WorkflowHistory.from_json(path.stem, path.read_text())

        # This loop's history and replayer bound as defaults: each function runs within its turn.
        async def copies(count: int, history: WorkflowHistory = history) -> AsyncIterator[WorkflowHistory]:
            for _ in range(count):
                yield history

        async def replay_once(_: int, replayer: Any = replayer) -> None:
            results = await replayer.replay_workflows(copies(1), raise_on_replay_failure=True)
            assert not results.replay_failures

        seconds = await per_unit(replay_once, args.times, warm_up=3)
        print(f"  {name}: {seconds * 1e3:.1f} ms CPU per replayed task ({len(history.events)} events, {path.name})")


async def trips(args: argparse.Namespace) -> None:
    """A trip to a thread and back with nothing to do there: Noeta's pool against the stdlib's
    executor (what ``loop.run_in_executor`` uses), one call at a time and ``--at-once`` together."""
    from concurrent.futures import ThreadPoolExecutor

    from noeta.activities._threads import ThreadPool

    print(f"# python bench/step_cost.py trips --calls {args.calls} --at-once {args.at_once}: 8 threads each")
    loop = asyncio.get_running_loop()
    executor, pool = ThreadPoolExecutor(8), ThreadPool(8, "io")
    systems: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("ThreadPoolExecutor", lambda: loop.run_in_executor(executor, int)),
        ("noeta ThreadPool", lambda: pool.run(int)),
    ]
    for _ in range(2):  # twice, alternated: this machine's speed moves between runs
        for name, trip in systems:
            async def one(_: int, trip: Callable[[], Awaitable[Any]] = trip) -> None:
                await trip()

            async def together(_: int, trip: Callable[[], Awaitable[Any]] = trip) -> None:
                await asyncio.gather(*(trip() for _ in range(args.at_once)))

            alone = await per_unit(one, args.calls, warm_up=200)
            batch = await per_unit(together, max(1, args.calls // args.at_once), warm_up=5) / args.at_once
            print(f"  {name}: {alone * 1e6:.0f} µs CPU per trip one at a time, {batch * 1e6:.0f} µs {args.at_once} at once")
    executor.shutdown()
    pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    acts = sub.add_parser("activities", help="a step's activities, in process")
    acts.add_argument("--tasks", type=int, default=300)
    rep = sub.add_parser("replay", help="a task's workflow side, replayed from recorded histories")
    rep.add_argument("histories", help="a directory written by bench/concurrency.py --dump-histories")
    rep.add_argument("--times", type=int, default=40)
    tr = sub.add_parser("trips", help="a trip to an I/O thread and back")
    tr.add_argument("--calls", type=int, default=3000)
    tr.add_argument("--at-once", type=int, default=32)
    args = parser.parse_args()
    asyncio.run({"activities": activities, "replay": replay, "trips": trips}[args.mode](args))


if __name__ == "__main__":
    main()
