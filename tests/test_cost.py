"""Cost: each model call priced in the activity from its Usage, summed per task, and shown in the
result, the event log, the NoetaCostUSD search attribute, ``noeta tasks`` and ``query()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient, connect_temporal, registered_search_attributes
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.errors import ConfigurationError
from noeta.providers.pricing import ModelPrice, PriceTable, parse_prices
from noeta.protocols.messages import Usage
from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES
from noeta.sdk._query import aquery
from noeta.sdk.testing import FakeLLMProvider
from tests.support.dev_server import make_older_release_database
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]

#: A call's usage: 7,000 uncached, 2,000 cache-read and 1,000 cache-write input tokens, 5,000 output.
KNOWN = Usage(uncached=7000, cache_read=2000, cache_write=1000, output=5000, reasoning_tokens=1000)


def test_catalogue_prices_of_two_models_match_their_published_prices():
    table = PriceTable()
    # claude-sonnet-4-5: $3 input, $0.30 cache read, $3.75 cache write, $15 output per million.
    sonnet = table.price(KNOWN, "claude-sonnet-4-5")
    assert sonnet is not None and sonnet.source == "genai-prices:anthropic/claude-sonnet-4-5"
    assert sonnet.usd == pytest.approx(7000 * 3e-6 + 2000 * 0.3e-6 + 1000 * 3.75e-6 + 5000 * 15e-6)
    # gpt-4o: $2.50 input, $1.25 cached input, $10 output per million (no cache-write price: input).
    gpt = table.price(KNOWN, "gpt-4o")
    assert gpt is not None and gpt.source == "genai-prices:openai/gpt-4o"
    assert gpt.usd == pytest.approx(7000 * 2.5e-6 + 2000 * 1.25e-6 + 1000 * 2.5e-6 + 5000 * 10e-6)
    assert table.price(KNOWN, "no-such-model") is None
    assert table.price(KNOWN, None) is None


def test_the_workers_own_prices_win_and_come_from_the_environment(tmp_path: Path):
    own = {"gpt-4o": ModelPrice(input_per_mtok=1, output_per_mtok=2, cache_read_per_mtok=0.5)}
    table = PriceTable(own)
    price = table.price(KNOWN, "gpt-4o")
    assert price is not None and price.source == "prices:gpt-4o"
    # cache write defaults to the input price
    assert price.usd == pytest.approx((7000 * 1 + 2000 * 0.5 + 1000 * 1 + 5000 * 2) / 1e6)

    inline = '{"private-llm": {"input_per_mtok": 0.2, "output_per_mtok": 0.4}}'
    assert PriceTable.from_env({"NOETA_PRICES": inline}).price(Usage(uncached=10**6), "private-llm").usd == pytest.approx(0.2)
    path = tmp_path / "prices.json"
    path.write_text(inline)
    assert PriceTable.from_env({"NOETA_PRICES": str(path)}).models == parse_prices(inline)
    assert PriceTable(catalogue=False).price(KNOWN, "gpt-4o") is None

    with pytest.raises(ConfigurationError, match="not valid JSON"):
        parse_prices("{nope")
    with pytest.raises(ConfigurationError, match="input_per_mtok must be a number >= 0"):
        parse_prices('{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}')
    with pytest.raises(ConfigurationError, match="unexpected keyword"):
        parse_prices('{"m": {"input": 1, "output_per_mtok": 1}}')
    with pytest.raises(ConfigurationError, match="cannot read"):
        parse_prices(str(tmp_path / "missing.json"))


@pytest.mark.server
def test_pricing_never_reaches_the_network():
    """genai-prices can update its catalogue over HTTP; Noeta never starts that. An audit hook that
    refuses every non-loopback connection sees no attempt while calls are priced, and (the control)
    does see the package's own updater when it is asked to fetch."""
    script = """
import json, sys
from tests.support.no_network import _hook, attempts
sys.addaudithook(_hook)
from noeta.providers.pricing import PriceTable
from noeta.protocols.messages import Usage
table = PriceTable()
prices = [table.price(Usage(uncached=1000, output=1000), m).usd for m in ("claude-sonnet-4-5", "gpt-4o", "gpt-4o-mini")]
quiet = list(attempts)
import genai_prices
try:
    genai_prices.UpdatePrices().fetch()
except Exception:
    pass
print(json.dumps({"prices": prices, "while_pricing": quiet, "control": attempts}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(p > 0 for p in report["prices"])
    assert report["while_pricing"] == []
    assert report["control"], "the hook should have caught the updater's fetch"


def per_call(usage: Usage, model: str = "claude-sonnet-4-5") -> float:
    price = PriceTable().price(usage, model)
    assert price is not None
    return price.usd


async def test_cost_is_recorded_per_call_summed_and_indexed(client: AsyncClient, serve, task_queue, settings, data_dir):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "add 1 and 2", Options(provider=provider, model="claude-sonnet-4-5", allowed_tools=[add]),
            task_queue=task_queue,
        )
        result = await client.result(task_id)
    first, second = per_call(Usage(uncached=10, output=3)), per_call(Usage(uncached=10, output=5))
    assert result.usage.cost_usd == pytest.approx(first + second)
    assert result.usage.cost_usd == pytest.approx((20 * 3 + 8 * 15) / 1e6)  # $0.00018

    completed = [e.payload for e in await client.events(task_id) if e.type == "ProviderCallCompleted"]
    assert [c.usage.cost_usd for c in completed] == pytest.approx([first, second])
    history = await client.history(task_id)
    assert b"genai-prices:anthropic/claude-sonnet-4-5" in b"".join(e.SerializeToString() for e in history)

    async def indexed() -> bool:
        tasks = {t.task_id: t for t in await client.list_tasks(limit=200)}
        return task_id in tasks and tasks[task_id].cost_usd == pytest.approx(first + second)

    await eventually(indexed)
    found = [wf.id async for wf in client.temporal.list_workflows(f"NoetaCostUSD > 0.00017 AND WorkflowId = '{task_id}'")]
    assert found == [task_id]

    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "tasks", "--status", "completed", "--limit", "500"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith(task_id))
    assert line.rstrip().endswith("cost $0.000180"), line


async def test_query_result_shows_the_cost_priced_by_the_hosts_table(host: HostConfig):
    provider = FakeLLMProvider(responses=[say("hello")])
    prices = PriceTable({"house-model": ModelPrice(input_per_mtok=1000, output_per_mtok=2000)})
    host = HostConfig(settings=host.settings, content_store=host.content_store, prices=prices)
    result = await aquery(Options(model="house-model"), goal="greet", provider=provider, host=host)
    assert result.cost_usd == pytest.approx((10 * 1000 + 5 * 2000) / 1e6)
    assert result.counts.model_calls == 1


async def test_an_unpriced_model_costs_nothing_and_says_so(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("hi")])
    async with serve(providers=[provider]):
        task_id = await client.start("hi", Options(provider=provider, model="private-llm"), task_queue=task_queue)
        result = await client.result(task_id)
    assert result.usage == Usage(uncached=10, output=5)
    history = await client.history(task_id)
    assert b"genai-prices" not in b"".join(e.SerializeToString() for e in history)


def test_noeta_run_prints_the_cost_priced_by_noeta_prices(settings, data_dir, task_queue):
    env = {
        **os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
        "NOETA_TASK_QUEUE": task_queue, "PYTHONPATH": str(ROOT),
        "NOETA_PRICES": '{"house-model": {"input_per_mtok": 1000, "output_per_mtok": 2000}}',
    }
    run = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "run", "what is 20 + 22?", "--registry", "tests.support.registry:cli_registry",
         "--model", "house-model", "--no-progress"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "the answer is 42\n"
    # two calls: 20 input tokens at $1000/M, 8 output tokens at $2000/M
    assert run.stderr.splitlines()[-1].endswith("20 in / 8 out tokens · $0.036000"), run.stderr


@pytest.mark.server
async def test_an_older_embedded_data_directory_gets_the_cost_attribute(tmp_path: Path):
    """The dev server registers its --search-attribute flags only in a new database: a data
    directory from before NoetaCostUSD gets it from the client that starts the server."""
    assert await make_older_release_database(tmp_path) == set(BASE_SEARCH_ATTRIBUTES)
    temporal, server = await connect_temporal(Settings(temporal_address=None, home=tmp_path))
    try:
        assert await registered_search_attributes(temporal) == set(SEARCH_ATTRIBUTES)
    finally:
        assert server is not None
        server.stop()
