"""A burst of tasks against a provider with a per-minute quota, as hosted APIs enforce it.

    python bench/rate_limits.py --tasks 200 --quota 120 --window 60 [--limit 110]

The provider server (tests.support.fault_server) admits ``--quota`` requests per fixed window and
answers the rest 429 with a ``retry-after`` to the next window. ``--limit N`` also gives the worker
its own limit of N requests per window (noeta.providers.limits). Prints tasks completed, 429s
served, attempts per model call and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from noeta.client.client import AsyncClient  # noqa: E402
from noeta.client.config import Settings  # noqa: E402
from noeta.client.embedded import EmbeddedServer  # noqa: E402
from noeta.client.options import HostConfig, Options  # noqa: E402
from noeta.providers.limits import ProviderLimit  # noqa: E402
from noeta.providers.openai import OpenAIProvider  # noqa: E402
from noeta.worker import Registry, build_worker  # noqa: E402
from tests.support.fault_server import running_fault_server  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--quota", type=int, default=120)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=None, help="the worker's own limit per window")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="noeta-rate-"))
    server = EmbeddedServer(home / "temporal", headless=True).start()
    client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=server.address, home=home)))
    queue = f"rate-{uuid.uuid4().hex[:8]}"
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · Python {platform.python_version()}")
    try:
        with running_fault_server(quota=(args.quota, args.window)) as fake:
            provider = OpenAIProvider(base_url=fake.base_url, api_key="", model="m", name="quota")
            limits = {"quota": ProviderLimit(requests=args.limit, per_seconds=args.window)} if args.limit else {}
            registry = Registry.of(providers=[provider], content_store=client.content_store, provider_limits=limits)
            async with build_worker(client.temporal, registry, queue):
                began = time.monotonic()
                starts = (client.start(f"task {i}", Options(provider="quota"), task_queue=queue) for i in range(args.tasks))
                task_ids = await asyncio.gather(*starts)
                results = await asyncio.gather(*(client.result(t) for t in task_ids), return_exceptions=True)
                wall = time.monotonic() - began
            attempts: collections.Counter[int] = collections.Counter()
            for task_id in task_ids:
                for env in await client.events(task_id):
                    if env.type == "ProviderCallCompleted":
                        attempts[env.payload.attempt] += 1
        completed = sum(1 for r in results if not isinstance(r, BaseException) and r.status == "completed")
        print(f"quota                {args.quota} requests per {args.window:g} s; worker limit {args.limit or 'none'}")
        print(f"tasks completed      {completed}/{args.tasks}")
        print(f"served               200: {fake.served(200)}, 429: {fake.served(429)}")
        print(f"attempts per call    {', '.join(f'{n}: {attempts[n]}' for n in sorted(attempts))}")
        print(f"wall                 {wall:.0f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
