"""A burst of tasks against a provider with a per-minute quota, as hosted APIs enforce it.

    python bench/rate_limits.py --tasks 200 --quota 120 --window 60 [--limit 120] [--workers 2]
        [--shared redis://127.0.0.1:6379/0] [--rate-headers]

The provider server (tests.support.fault_server) admits ``--quota`` requests per fixed window and
answers the rest 429 with a ``retry-after`` to the next window (``--rate-headers``: every answer
also says what is left of the window, as OpenAI's do). ``--limit N`` gives the provider a limit of N
requests per window (noeta.providers.limits); ``--workers K`` runs K workers, each on its own
connection, counting alone or, with ``--shared URL``, together in Redis or PostgreSQL. Prints
tasks completed, requests served (200 / 429), requests per answer, attempts per model call and the
wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
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
from noeta.providers.rate_windows import RedisWindows, windows_from_url  # noqa: E402
from noeta.worker import Registry, build_worker  # noqa: E402
from tests.support.fault_server import running_fault_server  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--quota", type=int, default=120)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=None, help="the provider's limit per window")
    parser.add_argument("--workers", type=int, default=1, help="workers, each on its own connection")
    parser.add_argument("--shared", default=None, help="redis:// or postgresql:// URL the workers count in")
    parser.add_argument("--rate-headers", action="store_true", help="the server announces what is left")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="noeta-rate-"))
    server = EmbeddedServer(home / "temporal", headless=True).start()
    host = HostConfig(settings=Settings(temporal_address=server.address, home=home))
    client = await AsyncClient.connect(host)
    queue = f"rate-{uuid.uuid4().hex[:8]}"
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · Python {platform.python_version()}")
    try:
        with running_fault_server(quota=(args.quota, args.window), rate_headers=args.rate_headers) as fake:
            limits = {"quota": ProviderLimit(requests=args.limit, per_seconds=args.window)} if args.limit else {}
            prefix = f"noeta:rate:{queue}:"  # a fresh count for each run
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(args.workers):
                    provider = OpenAIProvider(base_url=fake.base_url, api_key="", model="m", name="quota")
                    registry = Registry.of(providers=[provider], content_store=client.content_store, provider_limits=limits)
                    if args.shared:
                        windows = windows_from_url(args.shared)
                        if isinstance(windows, RedisWindows):
                            windows.prefix = prefix
                        registry.rate_limits = windows
                        stack.push_async_callback(windows.aclose)
                    # One connection per worker, as separate worker processes have.
                    own = await stack.enter_async_context(await AsyncClient.connect(host))
                    await stack.enter_async_context(build_worker(own.temporal, registry, queue))
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
        counted = f"counted {'in ' + args.shared.split(':')[0] if args.shared else 'by each worker'}"
        print(f"quota                {args.quota} requests per {args.window:g} s"
              f"{' (announced in headers)' if args.rate_headers else ''}; limit {args.limit or 'none'}")
        print(f"workers              {args.workers}, {counted}")
        print(f"tasks completed      {completed}/{args.tasks}")
        print(f"served               200: {fake.served(200)}, 429: {fake.served(429)}")
        print(f"requests per answer  {len(fake.seen) / max(1, fake.served(200)):.2f}")
        print(f"attempts per call    {', '.join(f'{n}: {attempts[n]}' for n in sorted(attempts))}")
        print(f"wall                 {wall:.0f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
