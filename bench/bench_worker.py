"""One benchmark worker process: Noeta's worker or the hand-written loop's, on one task queue.

    python bench/bench_worker.py noeta|baseline --address HOST:PORT --queue Q --home DIR [--max-activities N]

Started by bench/concurrency.py in a process of its own, so that its CPU time and peak RSS are its
own. Prints ``READY`` once polling, runs until SIGTERM/SIGINT, then shuts the worker down.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

READY = "READY"


async def noeta_worker(args: argparse.Namespace, worker_kwargs: dict[str, Any]) -> Any:
    from scripted_agent import ScriptedProvider, bench_output, bench_output_local

    from noeta.client.config import Settings
    from noeta.client.connect import connect_temporal
    from noeta.worker import Registry, build_worker

    settings = Settings(temporal_address=args.address, home=Path(args.home), task_queue=args.queue)
    temporal, _ = await connect_temporal(settings)
    registry = Registry.of(
        tools=[bench_output_local if args.system.startswith("noeta-local") else bench_output], providers=[ScriptedProvider()],
        content_store=settings.content_store(),
    )
    return build_worker(temporal, registry, args.queue, **worker_kwargs)


async def baseline_unsandboxed_worker(args: argparse.Namespace, worker_kwargs: dict[str, Any]) -> Any:
    from temporalio.worker import UnsandboxedWorkflowRunner

    return await baseline_worker(args, {**worker_kwargs, "workflow_runner": UnsandboxedWorkflowRunner()})


async def baseline_worker(args: argparse.Namespace, worker_kwargs: dict[str, Any]) -> Any:
    from baseline_activities import model, tool
    from baseline_loop import BaselineLoop
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    return Worker(client, task_queue=args.queue, workflows=[BaselineLoop], activities=[model, tool], **worker_kwargs)


async def serve(args: argparse.Namespace) -> None:
    worker_kwargs: dict[str, Any] = {"max_concurrent_activities": args.max_activities}
    if args.max_workflow_tasks is not None:
        worker_kwargs["max_concurrent_workflow_tasks"] = args.max_workflow_tasks
    if args.max_cached_workflows is not None:
        worker_kwargs["max_cached_workflows"] = args.max_cached_workflows
    if args.sticky_queue_timeout is not None:
        worker_kwargs["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=args.sticky_queue_timeout)
    if args.workflow_pollers is not None:
        worker_kwargs["workflow_task_poller_behavior"] = poller_behavior(args.workflow_pollers)
    if args.activity_pollers is not None:
        worker_kwargs["activity_task_poller_behavior"] = poller_behavior(args.activity_pollers)
    build = {
        "noeta": noeta_worker,
        "noeta-sandboxed": noeta_worker,  # the same worker; its tasks carry a policy of their own
        "noeta-local": noeta_worker,  # its tool declared local=True
        "noeta-local-model": noeta_worker,  # the same worker: the task asks for local model calls
        "baseline": baseline_worker,
        "baseline-unsandboxed": baseline_unsandboxed_worker,
        "baseline-reads-results": baseline_worker,  # the same worker; its tasks give the model tool results
        "baseline-local": baseline_worker,  # the same worker; its tasks run both calls as local activities
    }[args.system]
    worker = await build(args, worker_kwargs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    running = asyncio.create_task(worker.run())
    stopping = asyncio.create_task(stop.wait())
    print(READY, flush=True)
    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():  # the worker failed on its own: say so, and let the driver see the process end
        stopping.cancel()
        logging.getLogger(__name__).error("worker stopped by itself", exc_info=running.exception())
        exit_now(3)
    await worker.shutdown()
    await running


def poller_behavior(value: str) -> Any:
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    return PollerBehaviorAutoscaling() if value == "auto" else PollerBehaviorSimpleMaximum(int(value))


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=["noeta", "noeta-sandboxed", "noeta-local", "noeta-local-model", "baseline", "baseline-unsandboxed", "baseline-reads-results", "baseline-local"])
    parser.add_argument("--address", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--home", required=True, help="Noeta's data directory (its content store)")
    parser.add_argument("--max-activities", type=int, required=True)
    parser.add_argument("--max-workflow-tasks", type=int)
    parser.add_argument("--max-cached-workflows", type=int)
    parser.add_argument("--sticky-queue-timeout", type=float, help="seconds")
    parser.add_argument("--workflow-pollers", help="workflow-task pollers: a number, or 'auto' (autoscaling)")
    parser.add_argument("--activity-pollers", help="activity-task pollers: a number, or 'auto' (autoscaling)")
    asyncio.run(serve(parser.parse_args()))


def exit_now(code: int) -> None:
    """Exit without interpreter finalization: the SDK's native threads can abort a finished process
    while it finalizes ("PyGILState_Release ... finalizing", temporalio/sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Workflow modules are re-imported by the sandbox: the entry point must be guarded.
    main()
    exit_now(0)
