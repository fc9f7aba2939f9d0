"""What a dev server did, counted: its Prometheus ``/metrics`` (``--metrics-port``), by operation.

bench/concurrency.py reads it before and after a measured run, as operations per step: server CPU
per step says how much the server worked, these counts say on what (history writes, timer and
transfer tasks, visibility writes, cache misses). Tests read it to prove what the server did not do.
"""

from __future__ import annotations

import re
from collections import defaultdict

import httpx

#: The counter families compared, each split by its ``operation`` label.
FAMILIES = ("persistence_requests", "task_requests", "visibility_persistence_requests", "service_requests")
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$")
_OPERATION = re.compile(r'operation="([^"]*)"')


Counts = dict[str, float]


def parse(text: str) -> Counts:
    """``family:operation`` -> the counter's value, summed over its other labels."""
    counts: defaultdict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match["name"] not in FAMILIES:
            continue
        operation = _OPERATION.search(match["labels"] or "")
        counts[f"{match['name']}:{operation[1] if operation else '-'}"] += float(match["value"])
    return dict(counts)


async def scrape(port: int) -> Counts:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"http://127.0.0.1:{port}/metrics")
        response.raise_for_status()
        return parse(response.text)


def per_step(before: Counts, after: Counts, steps: int) -> dict[str, float]:
    """Each operation's count during the run, per step (operations that did not occur are left out)."""
    if not steps:
        return {}
    return {key: (value - before.get(key, 0.0)) / steps for key, value in after.items() if value > before.get(key, 0.0)}
