"""Scorers of the answer: exact, contains, regex, and the structured output field by field."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from noeta.evals._scorer import NamedScorer, missing, shorten, verdict
from noeta.evals.dataset import Case
from noeta.evals.run import EvalRun
from noeta.protocols.scoring import Score


def _norm(text: str, case_sensitive: bool) -> str:
    text = " ".join(text.split())  # whitespace differences are not wrong answers
    return text if case_sensitive else text.casefold()


def answer_exact(expected: str | None = None, *, case_sensitive: bool = False) -> NamedScorer:
    """1 when the answer is ``expected`` (default: the case's), whitespace and (unless
    ``case_sensitive``) case aside."""

    def score(case: Case, run: EvalRun) -> Score:
        want = expected if expected is not None else case.expected
        if want is None:
            return missing("expected answer")
        ok = _norm(run.answer, case_sensitive) == _norm(want, case_sensitive)
        return verdict(ok, "the expected answer" if ok else f"answered {shorten(run.answer)!r}, expected {shorten(want)!r}")

    return NamedScorer("answer_exact", score)


def answer_contains(expected: str | None = None, *, case_sensitive: bool = False) -> NamedScorer:
    """1 when the answer contains ``expected`` (default: the case's)."""

    def score(case: Case, run: EvalRun) -> Score:
        want = expected if expected is not None else case.expected
        if want is None:
            return missing("expected answer")
        ok = _norm(want, case_sensitive) in _norm(run.answer, case_sensitive)
        return verdict(ok, f"contains {shorten(want)!r}" if ok else f"{shorten(run.answer)!r} lacks {shorten(want)!r}")

    return NamedScorer("answer_contains", score)


def answer_regex(pattern: str | None = None, *, flags: int = re.IGNORECASE) -> NamedScorer:
    """1 when ``pattern`` (default: the case's ``expected``) matches somewhere in the answer."""

    def score(case: Case, run: EvalRun) -> Score:
        want = pattern if pattern is not None else case.expected
        if want is None:
            return missing("pattern")
        ok = re.search(want, run.answer, flags) is not None
        return verdict(ok, f"matches /{want}/" if ok else f"{shorten(run.answer)!r} does not match /{want}/")

    return NamedScorer("answer_regex", score)


def structured_equal(expected: Any = None, *, fields: Sequence[str] | None = None) -> NamedScorer:
    """The fraction of ``fields`` (default: every field of the expected object) whose value in
    the structured output equals the expected (default: the case's ``expected_data``); passed when
    all do. Non-object outputs are compared whole."""

    def score(case: Case, run: EvalRun) -> Score:
        want = _plain(expected if expected is not None else case.expected_data)
        got = _plain(run.data)
        if want is None:
            return missing("expected_data")
        if not isinstance(want, dict):
            return verdict(got == want, "equal" if got == want else f"got {shorten(got)}, expected {shorten(want)}")
        names = list(fields) if fields is not None else list(want)
        have = got if isinstance(got, dict) else {}
        wrong = [n for n in names if have.get(n) != want.get(n)]
        value = (len(names) - len(wrong)) / len(names) if names else 1.0
        reason = "every field equal" if not wrong else "differs in " + ", ".join(
            f"{n} ({shorten(have.get(n), 30)} != {shorten(want.get(n), 30)})" for n in wrong
        )
        return Score(value, not wrong, reason)

    return NamedScorer("structured_equal", score)


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
