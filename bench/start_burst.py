"""A burst of starts through injected RPC timeouts: every requested id makes exactly one task.

    python bench/start_burst.py [--starts 1000] [--given 750] [--attempt-timeout 1.0]

One embedded dev server; the client reaches it through a TCP proxy (tests/support/stalling_proxy.py)
that holds back the server's answers for a few seconds at a time while the burst is in flight:
the server still receives and acts on every start, the client's calls time out and are sent again
(same task id, same request id). ``--given`` starts name their task id, the rest leave it to the
client. No worker: the tasks are started, never run, and terminated at the end.

Prints: starts sent, distinct ids requested, starts that raised, resends after a timeout, tasks on
the server (visibility, per task queue), duplicates (an id with more than one run), orphans (tasks
no start returned), and then the same id started again with the same input (returns it) and with
another input (TaskAlreadyExistsError). Then the baseline, on the same server and proxy: the same
burst of ``temporalio`` ``start_workflow`` calls with a fresh id each and the same RPC timeout, no
retry (what the client did before starts were safe to retry).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import platform
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from noeta.client import starts  # noqa: E402
from noeta.client.client import AsyncClient  # noqa: E402
from noeta.client.options import Options  # noqa: E402
from noeta.protocols.names import WORKFLOW_NAME  # noqa: E402
from noeta.sdk import TaskAlreadyExistsError  # noqa: E402
from tests.support.stalling_proxy import StallingProxy  # noqa: E402

from embedded import embedded_server, host_at  # noqa: E402 (bench/, beside this script)


class Resends(logging.Handler):
    """Counts the starts sent again after a transient failure (the client logs each)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.statuses: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "sending it again" in message:
            self.count += 1
            self.statuses[message.split(": ", 1)[1].split(" ", 1)[0]] += 1


async def stall_while(burst: asyncio.Future, proxy: StallingProxy, stalled: float, flowing: float) -> int:
    """Hold the server's answers back ``stalled`` s, let them through ``flowing`` s, until the burst ends."""
    cycles = 0
    while not burst.done():
        proxy.stall()
        cycles += 1
        await asyncio.wait({burst}, timeout=stalled)
        proxy.resume()
        await asyncio.wait({burst}, timeout=flowing)
    return cycles


async def on_server(client: AsyncClient, queue: str, expected: int) -> list[str]:
    """The id of every workflow run on ``queue`` once visibility has caught up (or after 60 s)."""
    ids: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ids = [w.id async for w in client.temporal.list_workflows(f"TaskQueue = '{queue}'")]
        if len(ids) >= expected:
            await asyncio.sleep(2)  # and nothing more arrives after
            ids = [w.id async for w in client.temporal.list_workflows(f"TaskQueue = '{queue}'")]
            break
        await asyncio.sleep(0.5)
    return ids


async def main(args: argparse.Namespace) -> None:
    starts.ATTEMPT_TIMEOUT_SECONDS = args.attempt_timeout
    resends = Resends()
    logging.getLogger("noeta.client.starts").addHandler(resends)
    logging.getLogger("noeta.client.starts").setLevel(logging.INFO)
    with embedded_server() as (address, home):
        proxy = StallingProxy(("127.0.0.1", int(address.rsplit(":", 1)[1])))
        try:
            host = host_at(proxy.address, home)
            client = await AsyncClient.connect(host)
            await client.registered_attributes()  # asked once per client, not part of the burst
            queue = f"burst-{uuid.uuid4().hex[:8]}"
            given = [f"{queue}-{i}" for i in range(args.given)]
            calls = [client.start("Count to 3.", Options(), task_id=i, task_queue=queue) for i in given]
            calls += [client.start("Count to 3.", Options(), task_queue=queue) for _ in range(args.starts - args.given)]
            began = time.monotonic()
            burst = asyncio.gather(*calls, return_exceptions=True)
            cycles = await stall_while(burst, proxy, args.stall_seconds, args.flow_seconds)
            outcomes = await burst
            wall = time.monotonic() - began
            returned = [o for o in outcomes if isinstance(o, str)]
            raised = collections.Counter(type(o).__name__ for o in outcomes if not isinstance(o, str))
            # Each start without an id asks for one fresh id (the client makes it once, for every resend).
            requested = len(set(given)) + args.starts - args.given
            ids = await on_server(client, queue, requested)
            runs = collections.Counter(ids)
            print(f"# {platform.node()} · {platform.machine()} · {os.cpu_count()} cores · Python "
                  f"{platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')} · attempt timeout "
                  f"{args.attempt_timeout} s · answers held back {args.stall_seconds} s of every "
                  f"{args.stall_seconds + args.flow_seconds} s ({cycles} times)")
            print(f"starts sent                       {len(calls)} ({args.given} with an id, {args.starts - args.given} without)")
            print(f"distinct ids requested            {requested}")
            print(f"starts that raised                {sum(raised.values())} {dict(raised) or ''}")
            print(f"starts sent again after a timeout {resends.count} {dict(resends.statuses)}")
            print(f"tasks on the server               {len(runs)}")
            print(f"duplicates (ids with > 1 run)     {sum(1 for n in runs.values() if n > 1)}")
            print(f"orphans (tasks no start returned) {len(set(runs) - set(returned))}")
            print(f"given ids without a task          {len(set(given) - set(runs))}")
            print(f"burst wall time                   {wall:.1f} s")

            same = await client.start("Count to 3.", Options(), task_id=given[0], task_queue=queue)
            print(f"same id, same input               returns {same == given[0]}")
            try:
                await client.start("Count to 4.", Options(), task_id=given[0], task_queue=queue)
                print("same id, other input              NOT refused")
            except TaskAlreadyExistsError as err:
                print(f"same id, other input              {type(err).__name__}")
            await asyncio.gather(*(client.temporal.get_workflow_handle(i).terminate("bench over") for i in runs))

            # Baseline: plain start_workflow, a fresh id per call, no retry.
            base_queue = f"raw-{uuid.uuid4().hex[:8]}"
            raw_ids = [f"{base_queue}-{uuid.uuid4().hex[:8]}" for _ in range(args.starts)]
            raw = asyncio.gather(*(
                client.temporal.start_workflow(
                    WORKFLOW_NAME, "Count to 3.", id=i, task_queue=base_queue,
                    rpc_timeout=timedelta(seconds=args.attempt_timeout),
                ) for i in raw_ids
            ), return_exceptions=True)
            await stall_while(raw, proxy, args.stall_seconds, args.flow_seconds)
            raw_outcomes = await raw
            raw_failed = {i for i, o in zip(raw_ids, raw_outcomes, strict=True) if isinstance(o, BaseException)}
            raw_runs = set(await on_server(client, base_queue, args.starts - len(raw_failed)))
            print(f"baseline: starts that raised      {len(raw_failed)} "
                  f"{dict(collections.Counter(type(o).__name__ for o in raw_outcomes if isinstance(o, BaseException)))}")
            print(f"baseline: tasks on the server     {len(raw_runs)}")
            print(f"baseline: raised but created      {len(raw_failed & raw_runs)} (a retry with a fresh id duplicates each)")
            await asyncio.gather(*(client.temporal.get_workflow_handle(i).terminate("bench over") for i in raw_runs))
            await client.close()
        finally:
            proxy.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=1000)
    parser.add_argument("--given", type=int, default=750)
    parser.add_argument("--attempt-timeout", type=float, default=1.0)
    parser.add_argument("--stall-seconds", type=float, default=1.5)
    parser.add_argument("--flow-seconds", type=float, default=1.5)
    asyncio.run(main(parser.parse_args()))
