"""The built-in scorers, each a function returning a scorer named after it (``answer_contains()``
scores under ``"answer_contains"``). Any callable ``(case, run) -> Score`` is a scorer too."""

from noeta.evals._answers import answer_contains, answer_exact, answer_regex, structured_equal
from noeta.evals._judge import llm_judge
from noeta.evals._paths import guard_outcome, outcome_of, tool_trajectory, within_budget
from noeta.evals._scorer import NamedScorer

__all__ = [
    "NamedScorer", "answer_contains", "answer_exact", "answer_regex", "guard_outcome", "llm_judge", "outcome_of",
    "structured_equal", "tool_trajectory", "within_budget",
]
