"""An LLM judge: a model scores the answer against a rubric, through any provider.

Its calls are counted and priced like a task's (the provider's reported cost, else the worker's
price table for the model) and carried on the Score, so a report's cost includes the judging.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable
from typing import Any

from noeta.evals._scorer import NamedScorer
from noeta.evals.dataset import Case
from noeta.evals.run import EvalRun
from noeta.errors import ConfigurationError
from noeta.protocols.messages import LLMProvider, LLMRequest, LLMResponse, Message, TextBlock
from noeta.protocols.scoring import Score
from noeta.providers.pricing import PriceTable

JUDGE_SYSTEM = (
    "You grade an AI agent's answer against a rubric. Reply with JSON only: "
    '{"score": <a number from 0 to 1>, "reason": "<one sentence>"}.'
)
_NUMBER = re.compile(r"(?<![\d.])(0(?:\.\d+)?|1(?:\.0+)?)(?![\d.])")


def llm_judge(
    rubric: str, *, provider: LLMProvider | str, model: str | None = None, threshold: float = 0.5,
    name: str = "llm_judge", prices: PriceTable | None = None,
) -> NamedScorer:
    """A model grades each answer against ``rubric`` (0..1; passed at ``threshold`` or above).
    ``provider``: an LLMProvider, or a built-in one's name ("anthropic", "openai", "local");
    ``prices``: how its calls are priced when the provider reports no cost (default: NOETA_PRICES
    over the catalogue). ``name`` tells two judges apart in a report."""
    if not rubric.strip():
        raise ConfigurationError("llm_judge needs a rubric")
    if not 0.0 <= threshold <= 1.0:
        raise ConfigurationError(f"llm_judge threshold is between 0 and 1, got {threshold!r}")
    judge = _provider(provider)
    table = prices

    def score(case: Case, run: EvalRun) -> Score:
        nonlocal table
        parts = [f"Rubric:\n{rubric}", f"Goal:\n{case.goal}"]
        if case.expected is not None:
            parts.append(f"Reference answer:\n{case.expected}")
        parts.append(f"Agent's answer:\n{run.answer}")
        request = LLMRequest(
            model=model, system=JUDGE_SYSTEM, temperature=0.0, max_tokens=512,
            messages=[Message(role="user", content=[TextBlock(text="\n\n".join(parts))])],
        )
        answered = judge.complete(request)
        # Scorers run on a thread of their own: an async provider's call gets a loop of its own.
        response = asyncio.run(_awaited(answered)) if inspect.isawaitable(answered) else answered
        usage = response.usage
        cost = usage.cost_usd
        if not cost:
            table = table or PriceTable.from_env()
            price = table.price(usage, model, judge)
            cost = price.usd if price is not None else 0.0
        value, reason = _verdict(response.text)
        return Score(value, value >= threshold, reason, cost_usd=cost, model_calls=1)

    return NamedScorer(name, score)


async def _awaited(answer: Awaitable[LLMResponse]) -> LLMResponse:
    return await answer


def _provider(provider: LLMProvider | str) -> LLMProvider:
    if isinstance(provider, LLMProvider):
        return provider
    from noeta.providers.defaults import default_provider

    return default_provider(provider)


def _verdict(text: str) -> tuple[float, str]:
    """The judge's score and reason: its JSON, else the first number from 0 to 1 in its reply."""
    found: Any = None
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        try:
            found = json.loads(text[start : end + 1])
        except ValueError:
            found = None
    if isinstance(found, dict) and isinstance(found.get("score"), (int, float)):
        return min(max(float(found["score"]), 0.0), 1.0), str(found.get("reason") or "")
    match = _NUMBER.search(text)
    if match:
        return float(match.group(1)), text.strip()[:200]
    return 0.0, f"the judge gave no score: {text.strip()[:120]!r}"
