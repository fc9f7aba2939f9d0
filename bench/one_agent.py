"""One agent against a running server: wall time per step and time to the first model call.

    python bench/one_agent.py                       # 1 agent x 50 steps, 5 repetitions
    python bench/one_agent.py --steps 50 --repeat 9 --json out.json

Starts a dev server (Noeta's embedded one) and keeps it running; then, interleaved per
repetition, runs one task of K tool steps to its end with

- ``query()`` (``noeta`` and ``noeta-local``): the caller's process runs the worker, as a script
  does; the tool is bench/scripted_agent.py's, declared ``local=True`` for ``noeta-local``; "first
  model call" is when the scripted provider is first called, counted from the ``aquery()`` call;
- ``noeta-local-model``: ``noeta-local`` with ``Options(model_local_activity=True)`` (every model
  call a local activity too);
- ``noeta-local-not-eager``: ``noeta-local`` with the start's eager request taken out (a
  diagnostic: what eager workflow start saves before the first model call);
- the floor (``baseline``): bench/baseline_loop.py on a worker in this process, started with
  ``start_workflow`` and awaited; "first model call" is when its model activity first runs.

Each system's first task (a warm-up: imports, the first worker's start) is not counted. Wall
times depend on the machine and its load: compare systems within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
for path in (BENCH_DIR, BENCH_DIR.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from baseline_activities import WORKFLOW_NAME as BASELINE_WORKFLOW  # noqa: E402
from baseline_activities import LoopInput, LoopResult, ModelInput, ModelReply  # noqa: E402
from scripted_agent import ScriptedProvider, bench_output, bench_output_local  # noqa: E402
from workload import final_answer, goal_for  # noqa: E402

SYSTEMS = ("baseline", "noeta", "noeta-local", "noeta-local-model", "noeta-local-not-eager")
_first_call: list[float] = []


class FirstCallProvider(ScriptedProvider):
    """The bench's scripted provider, noting when it is first called."""

    async def complete(self, request: Any) -> Any:
        if not _first_call:
            _first_call.append(time.perf_counter())
        return await super().complete(request)


_eager = [True]


def _allow_eager_start_switch() -> None:
    """Let ``_eager[0] = False`` take the eager request out of every start (noeta-local-not-eager)."""
    from temporalio.client import Client

    start = Client.start_workflow

    async def start_workflow(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _eager[0]:
            kwargs["request_eager_start"] = False
        return await start(self, *args, **kwargs)

    Client.start_workflow = start_workflow  # type: ignore[method-assign]


async def run_query(
    address: str, home: Path, steps: int, output_bytes: int, local: bool, local_model: bool = False
) -> tuple[float, float]:
    from noeta.client.config import Settings
    from noeta.client.options import HostConfig, Options
    from noeta.sdk import aquery

    _first_call.clear()
    options = Options(
        allowed_tools=[bench_output_local if local else bench_output], max_turns=steps + 1,
        model_local_activity=local_model,
    )
    host = HostConfig(settings=Settings(temporal_address=address, home=home))
    began = time.perf_counter()
    result = await aquery(options, goal=goal_for(steps, output_bytes), provider=FirstCallProvider(), host=host)
    ended = time.perf_counter()
    if result.status != "completed" or result.answer() != final_answer(steps):
        raise RuntimeError(f"noeta task ended {result.status}: {result.answer()[:200]}")
    return ended - began, _first_call[0] - began


async def run_floor(address: str, steps: int, output_bytes: int) -> tuple[float, float]:
    from baseline_activities import model, tool
    from baseline_loop import BaselineLoop
    from temporalio import activity
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    first: list[float] = []

    @activity.defn(name="bench.model")
    async def timed_model(inp: ModelInput) -> ModelReply:
        if not first:
            first.append(time.perf_counter())
        return await model(inp)

    began = time.perf_counter()
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    queue = f"one-agent-floor-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[BaselineLoop], activities=[timed_model, tool]):
        result = await client.execute_workflow(
            BASELINE_WORKFLOW, LoopInput(steps, output_bytes), id=queue, task_queue=queue,
            result_type=LoopResult, request_eager_start=True,
        )
    ended = time.perf_counter()
    if result.steps != steps:
        raise RuntimeError(f"floor task ended with {result!r}")
    return ended - began, first[0] - began


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from noeta.client.embedded import EmbeddedServer

    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in SYSTEMS}
    _allow_eager_start_switch()
    with tempfile.TemporaryDirectory(prefix="noeta-one-agent-") as tmp:
        server = EmbeddedServer(Path(tmp) / "temporal", headless=True).start()
        try:
            for rep in range(args.repeat + 1):  # the first round warms up
                for name in SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]:
                    if name == "baseline":
                        wall, first = await run_floor(server.address, args.steps, args.tool_output_bytes)
                    else:
                        _eager[0] = name != "noeta-local-not-eager"
                        wall, first = await run_query(
                            server.address, Path(tmp), args.steps, args.tool_output_bytes, name != "noeta",
                            local_model=name == "noeta-local-model",
                        )
                    if rep:
                        figures[name].append((wall, first))
                        print(f"  {name}: {1000 * wall / args.steps:.1f} ms/step, first model call after "
                              f"{1000 * first:.0f} ms", flush=True)
        finally:
            server.stop()
    report: dict[str, Any] = {"steps": args.steps, "repeat": args.repeat, "systems": {}}
    print(f"\n1 agent × {args.steps} steps, {args.repeat} runs each (medians, min–max):")
    print("| system | wall ms/step | first model call ms | wall/step against the floor |")
    print("|---|---:|---:|---:|")
    floor = statistics.median(w for w, _ in figures["baseline"]) / args.steps
    for name in SYSTEMS:
        walls = [1000 * w / args.steps for w, _ in figures[name]]
        firsts = [1000 * f for _, f in figures[name]]
        per_step = statistics.median(walls)
        report["systems"][name] = {"wall_ms_per_step": walls, "first_model_call_ms": firsts}
        print(f"| {name} | {per_step:.1f} ({min(walls):.1f}–{max(walls):.1f}) | {statistics.median(firsts):.0f} "
              f"({min(firsts):.0f}–{max(firsts):.0f}) | {per_step / (1000 * floor):.2f}× |")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tool-output-bytes", type=int, default=200)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
