"""Scorers of how the run got there: its tool path, its budgets, and what guards and people decided."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from noeta.evals._scorer import NamedScorer, missing, verdict
from noeta.evals.dataset import Case, ExpectedTool
from noeta.evals.run import EvalRun, ToolCall
from noeta.errors import ConfigurationError
from noeta.protocols import event_log as ev
from noeta.protocols.scoring import Score

TrajectoryMode = Literal["in_order", "any_order", "subset"]
Outcome = Literal["allowed", "refused", "approved", "denied"]


def _matches(call: ToolCall, want: ExpectedTool) -> bool:
    if call.name != want.name:
        return False
    return want.arguments is None or all(call.arguments.get(k) == v for k, v in want.arguments.items())


def tool_trajectory(expected: list[str | ExpectedTool] | None = None, *, mode: TrajectoryMode = "in_order") -> NamedScorer:
    """The run's tool calls against the expected ones (default: the case's ``expected_tools``;
    arguments, where given, must be among the call's). ``in_order``: the same calls in the same
    order, nothing else; ``any_order``: the same calls in any order; ``subset``: every expected call
    was made (others may be too). The value is the fraction of expected calls matched."""
    if mode not in ("in_order", "any_order", "subset"):
        raise ConfigurationError(f"tool_trajectory mode is in_order, any_order or subset, got {mode!r}")

    def score(case: Case, run: EvalRun) -> Score:
        wants = [ExpectedTool(t) if isinstance(t, str) else t for t in expected] if expected is not None else case.tools()
        calls = [c for c in run.tool_calls() if not c.refused]
        names = " -> ".join(c.name for c in calls) or "no tool call"
        if not wants and not case.expected_tools and expected is None and not calls:
            return verdict(True, "no tool call, none expected")
        if mode == "in_order":
            matched = sum(1 for c, w in zip(calls, wants, strict=False) if _matches(c, w))
            ok = matched == len(wants) == len(calls)
        else:
            left = list(calls)
            matched = 0
            for want in wants:
                found = next((c for c in left if _matches(c, want)), None)
                if found is not None:
                    left.remove(found)
                    matched += 1
            ok = matched == len(wants) and (mode == "subset" or not left)
        value = matched / max(len(wants), len(calls) if mode != "subset" else 0, 1)
        expected_path = " -> ".join(w.name for w in wants) or "no tool call"
        return Score(1.0 if ok else min(value, 0.99), ok, f"called {names}" + ("" if ok else f"; expected {expected_path} ({mode})"))

    return NamedScorer("tool_trajectory", score)


def within_budget(
    *, max_turns: int | None = None, max_tokens: int | None = None, max_cost_usd: float | None = None,
    max_seconds: float | None = None,
) -> NamedScorer:
    """1 when the run stayed within every limit given (model turns, input+output tokens, US
    dollars, seconds from start to end); the reason names the limits it passed."""
    if all(v is None for v in (max_turns, max_tokens, max_cost_usd, max_seconds)):
        raise ConfigurationError("within_budget needs at least one of max_turns, max_tokens, max_cost_usd, max_seconds")

    def score(case: Case, run: EvalRun) -> Score:
        over = []
        if max_turns is not None and run.turns > max_turns:
            over.append(f"{run.turns} turns > {max_turns}")
        if max_tokens is not None and run.tokens > max_tokens:
            over.append(f"{run.tokens} tokens > {max_tokens}")
        if max_cost_usd is not None and run.cost_usd > max_cost_usd:
            over.append(f"${run.cost_usd:.4f} > ${max_cost_usd}")
        if max_seconds is not None and run.duration_seconds > max_seconds:
            over.append(f"{run.duration_seconds:.1f} s > {max_seconds} s")
        return verdict(not over, "; ".join(over) if over else "within budget")

    return NamedScorer("within_budget", score)


def outcome_of(run: EvalRun) -> Outcome:
    """What oversight decided in the run: ``denied`` (a human refused, or nobody answered in time),
    ``refused`` (a guard stopped a call), ``approved`` (a human approved one), else ``allowed``."""
    if run.of_type(ev.ApprovalDenied):
        return "denied"
    if run.of_type(ev.ToolCallRefused):
        return "refused"
    if run.of_type(ev.ApprovalGranted):
        return "approved"
    return "allowed"


def guard_outcome(expected: Outcome | None = None) -> NamedScorer:
    """1 when the run's oversight outcome (:func:`outcome_of`) is ``expected`` (default: the case's
    ``metadata["guard_outcome"]``): a case that must be refused scores 1 only when it was."""

    def score(case: Case, run: EvalRun) -> Score:
        want = expected or case.metadata.get("guard_outcome")
        if want is None:
            return missing('metadata["guard_outcome"]')
        got = outcome_of(run)
        verdicts = Counter(v.verdict for v in run.of_type(ev.GuardVerdict))
        seen = ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items())) or "no guard verdict"
        return verdict(got == want, f"{got} ({seen})" + ("" if got == want else f", expected {want}"))

    return NamedScorer("guard_outcome", score)


__all__ = ["guard_outcome", "outcome_of", "tool_trajectory", "within_budget", "missing"]
