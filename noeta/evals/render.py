"""An eval report as text: the case x scorer table with its totals, and two reports side by side."""

from __future__ import annotations

from noeta.evals.report import EvalReport


def _cell(report: EvalReport, case_id: str, scorer: str) -> str:
    row = next((r for r in report.rows if r.case_id == case_id), None)
    if row is None or scorer not in row.scores:
        return "-"
    score = row.scores[scorer]
    return ("pass" if score.passed else "FAIL") + ("" if score.value in (0.0, 1.0) else f" {score.value:.2f}")


def _totals(report: EvalReport) -> list[str]:
    lines = [
        f"{s}: {report.passed(s)}/{len(report.rows)} passed, mean {report.mean(s):.2f}" for s in report.scorers
    ]
    lines.append(
        f"cost ${report.cost_usd:.4f} (scoring ${report.scoring_cost_usd:.4f}, {report.scoring_calls} judge call(s)); "
        f"time p50 {report.seconds(0.5):.2f} s, p95 {report.seconds(0.95):.2f} s"
    )
    return lines


def table(report: EvalReport) -> str:
    """Case x scorer, then each scorer's passes and mean, the cost and the p50/p95 task time."""
    head = ["case", *report.scorers, "seconds", "cost $", "task"]
    body = [
        [r.case_id, *(_cell(report, r.case_id, s) for s in report.scorers), f"{r.duration_seconds:.2f}",
         f"{r.cost_usd:.4f}", r.task_id]
        for r in report.rows
    ]
    title = f"eval {report.eval_id}" + (f" — {report.label}" if report.label else "")
    return "\n".join([title, *_grid(head, body), "", *_totals(report)])


def side_by_side(left: EvalReport, right: EvalReport) -> str:
    """Two reports on the same cases: each scorer's cell for the left and the right, then both
    reports' totals (``7/10`` beside ``9/10``)."""
    scorers = [s for s in left.scorers if s in right.scorers]
    ids = [r.case_id for r in left.rows] + [r.case_id for r in right.rows if r.case_id not in {x.case_id for x in left.rows}]
    a, b = left.label or "A", right.label or "B"
    head = ["case", *(f"{s} [{side}]" for s in scorers for side in ("A", "B"))]
    body = [[c, *(_cell(rep, c, s) for s in scorers for rep in (left, right))] for c in ids]
    totals = [
        f"{s}: A {left.passed(s)}/{len(left.rows)} (mean {left.mean(s):.2f})   "
        f"B {right.passed(s)}/{len(right.rows)} (mean {right.mean(s):.2f})"
        for s in scorers
    ]
    totals.append(f"cost: A ${left.cost_usd:.4f}   B ${right.cost_usd:.4f}")
    return "\n".join([f"A = {a}", f"B = {b}", *_grid(head, body), "", *totals])


def _grid(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(x) for x in column) for column in zip(head, *body, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(head), line(["-" * w for w in widths]), *(line(r) for r in body)]
