"""Evals: a dataset run as real tasks and scored, recorded tasks scored without running them, an
LLM judge's calls in the report, and online scores recorded in the tasks' history."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.evals.render import side_by_side, table
from noeta.protocols import event_log as ev
from noeta.providers.pricing import ModelPrice, PriceTable
from noeta.sdk import aquery
from noeta.sdk.testing import Case, EvalReport, OnlineScoring, Score, aevaluate, scorers
from noeta.telemetry.metrics import runtime_for
from tests.support import evals
from tests.support.waiting import eventually
from tests.test_telemetry import free_port, sample


def _scorers() -> list:
    return [scorers.answer_contains(), scorers.tool_trajectory()]


async def test_a_dataset_scored_compared_and_its_recorded_tasks_scored_again(client: AsyncClient, host: HostConfig, tmp_path: Path):
    path = evals.write_dataset(tmp_path)
    plain, fixed = evals.scripted(evals.WRONG), evals.scripted(evals.WRONG - evals.FIXED)
    report = await aevaluate(path, options=evals.eval_options(), provider=plain, scorers=_scorers(), host=host, label="plain")

    assert [r.case_id for r in report.rows] == [f"q{n}" for n in range(1, 11)]
    assert report.passed("answer_contains") == 7 and report.mean("answer_contains") == pytest.approx(0.7)
    assert [r.case_id for r in report.rows if not r.scores["tool_trajectory"].passed] == [f"q{evals.DETOUR}"]
    assert "lookup" in report.rows[evals.DETOUR - 1].scores["tool_trajectory"].reason
    assert report.below(0.8) == {"answer_contains": pytest.approx(0.7)} and report.below(0.6) == {}
    assert "answer_contains: 7/10 passed" in table(report)
    # Every case ran as a task tagged with the eval's id.
    query = f"NoetaEval = '{report.eval_id}'"
    await eventually(lambda: _count(client, query), 10)

    better = await aevaluate(path, options=evals.eval_options(), provider=fixed, scorers=_scorers(), host=host, label="fixed")
    assert better.passed("answer_contains") == 9
    shown = side_by_side(report, better)
    assert "answer_contains: A 7/10" in shown and "B 9/10" in shown

    # 20 recorded tasks scored twice: no model call and no tool call, the same scores.
    calls = (plain.calls.value, fixed.calls.value, evals.TOOL_CALLS.value)  # type: ignore[attr-defined]
    ids = [r.task_id for r in report.rows + better.rows]
    recorded_scorers = [scorers.answer_regex(r"code-\d+"), scorers.tool_trajectory(["search"]), scorers.within_budget(max_turns=3)]
    first = await aevaluate(recorded=ids, scorers=recorded_scorers, host=host)
    exported = {r.case_id: await client.export(r.task_id) for r in report.rows}
    by_case = await aevaluate(path, recorded=exported, scorers=_scorers(), host=host)
    second = await aevaluate(recorded=ids, scorers=recorded_scorers, host=host)
    assert (plain.calls.value, fixed.calls.value, evals.TOOL_CALLS.value) == calls  # type: ignore[attr-defined]
    assert len(first.rows) == 20 and [r.scores for r in first.rows] == [r.scores for r in second.rows]
    assert first.passed("answer_regex") == 16 and first.passed("tool_trajectory") == 18 and first.passed("within_budget") == 20
    assert by_case.passed("answer_contains") == 7 and [r.scores for r in by_case.rows] == [r.scores for r in report.rows]
    # The JSON for CI reads back.
    assert EvalReport.__name__ in repr(type(report)) and '"answer_contains"' in report.to_json()


async def _count(client: AsyncClient, query: str) -> int:
    return (await client.temporal.count_workflows(query)).count


async def test_an_llm_judge_records_its_calls_and_cost(host: HostConfig):
    judge = evals.judge(0.8)
    prices = PriceTable({"judge-model": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)})
    cases = [Case(goal=row["goal"], id=row["id"], expected=row["expected"]) for row in evals.dataset_rows()[:3]]
    report = await aevaluate(
        cases, options=evals.eval_options(), provider=evals.scripted(set()), host=host,
        scorers=[scorers.llm_judge("Is the code right?", provider=judge, model="judge-model", prices=prices)],
    )
    assert len(judge.received_requests) == 3 and report.scoring_calls == 3
    assert all(r.scores["llm_judge"] == Score(0.8, True, "reads right", cost_usd=pytest.approx(0.0012), model_calls=1) for r in report.rows)
    assert report.scoring_cost_usd == pytest.approx(3 * (1000 * 1.0 + 100 * 2.0) / 1e6)
    assert report.to_dict()["scoring_calls"] == 3 and "1 judge call" not in table(report) and "3 judge call(s)" in table(report)


async def test_online_scoring_records_taskscored_and_the_metric(settings, content_store: LocalContentStore, client: AsyncClient):
    address = f"127.0.0.1:{free_port()}"
    runtime = runtime_for(address)
    assert runtime is not None
    host = HostConfig(settings=settings, content_store=content_store, runtime=runtime)
    right = scorers.answer_regex(r"code-\d+")
    scored = Options(allowed_tools=[evals.search, evals.lookup], scoring=OnlineScoring([right], sample=1.0))
    unscored = Options(allowed_tools=[evals.search, evals.lookup], scoring=OnlineScoring([right], sample=0.0))
    provider = evals.scripted({2})
    done = [await aquery(scored, goal=f"What is the code of item {n}?", provider=provider, host=host) for n in (1, 2, 3)]
    skipped = [await aquery(unscored, goal=f"What is the code of item {n}?", provider=provider, host=host) for n in (4, 5)]

    for result, value in zip(done, (1.0, 0.0, 1.0), strict=True):
        found = [e.payload for e in result.events if isinstance(e.payload, ev.TaskScored)]
        assert len(found) == 1 and found[0].mean == value and found[0].scores[0].scorer == "answer_regex"
        assert (await client.describe(result.task_id)).score == value
    assert not any(isinstance(e.payload, ev.TaskScored) for r in skipped for e in r.events)
    async with httpx.AsyncClient(timeout=60) as http:
        text = (await http.get(f"http://{address}/metrics")).text
    # One series per query()'s task queue: the counts of every series add up to the tasks scored.
    counts = [line for line in text.splitlines() if line.startswith("noeta_task_score_count{") and 'scorer="answer_regex"' in line]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in counts) == 3
    assert sample(text, "noeta_task_score_count", scorer="answer_regex", passed="false") == 1


@pytest.mark.server
def test_noeta_eval_gates_on_min_score_and_compares(settings, data_dir: Path, tmp_path: Path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir), "PYTHONPATH": str(root)}
    path = evals.write_dataset(tmp_path)
    base = [sys.executable, "-m", "noeta.cli", "eval", str(path), "--provider", "tests.support.evals:plain",
            "--options", "tests.support.evals:options"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)

    strict = run("--min-score", "0.8")
    assert strict.returncode == 1, strict.stderr
    assert "answer_contains: 7/10 passed" in strict.stdout and "below --min-score: answer_contains 0.70" in strict.stderr
    lenient = run("--min-score", "0.6", "--compare", "provider=tests.support.evals:fixed")
    assert lenient.returncode == 0, lenient.stderr
    assert "answer_contains: A 7/10 (mean 0.70)   B 9/10 (mean 0.90)" in lenient.stdout
    gate = run("--min-score", "answer_contains=0.6,tool_trajectory=0.95", "--json")
    assert gate.returncode == 1 and '"mean": 0.7' in gate.stdout
