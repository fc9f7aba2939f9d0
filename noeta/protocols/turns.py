"""Turns: what a user points at in a task's record (a replay compares them one by one).

A turn is one model call and the tool calls it asked for. Turns are numbered from 1 across the
whole task, over every goal and every run after continue-as-new, in the order the workflow makes
its model calls: the workflow counts the call in ``Carry.total_turns`` and sends that number as
``CallModelInput.turn``, which history keeps; whatever reads a turn back from history (the event
log's ``ProviderCallStarted.turn``, an export, a replay) reads that same number.

A turn's *decision* is what the model chose: the tool calls it asked for (names and arguments), or,
asking for none, its final answer (compared as JSON data when the text is JSON, as text otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from noeta.protocols.messages import Block, TextBlock, ToolUseBlock


@dataclass(frozen=True, slots=True)
class ToolCallDecision:
    """One tool call a model asked for: the tool's name and its arguments (the call id is the
    model's label for it, not part of the decision)."""

    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TurnDecision:
    """What a model decided in one turn: tool calls, or (none asked for) its answer."""

    tool_calls: tuple[ToolCallDecision, ...] = ()
    answer: str | None = None
    """The answer's text when the model asked for no tool (None: it asked for tools)."""

    @property
    def data(self) -> Any:
        """The answer parsed as JSON when it is a JSON object or array (structured output), else
        None."""
        if self.answer is None:
            return None
        try:
            value = json.loads(self.answer)
        except ValueError:
            return None
        return value if isinstance(value, (dict, list)) else None

    def same_as(self, other: TurnDecision) -> bool:
        """Whether ``other`` is the same decision: the same tool calls in the same order with equal
        arguments, or the same answer (equal data when both are JSON, equal text otherwise, leading
        and trailing whitespace aside)."""
        if self.tool_calls or other.tool_calls:
            return self.tool_calls == other.tool_calls
        if self.answer is None or other.answer is None:
            return self.answer == other.answer
        mine, theirs = self.data, other.data
        if mine is not None and theirs is not None:
            return bool(mine == theirs)
        return self.answer.strip() == other.answer.strip()

    def describe(self, limit: int = 60) -> str:
        """One line: ``tool(arguments), ...`` or ``answer: text``, cut to ``limit`` characters."""
        if self.tool_calls:
            text = ", ".join(
                f"{c.tool_name}({json.dumps(c.arguments, sort_keys=True, separators=(',', ':'), default=str)})"
                for c in self.tool_calls
            )
        else:
            text = "answer: " + " ".join((self.answer or "").split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def decision_of(content: Sequence[Block]) -> TurnDecision:
    """The decision in a model response's content blocks (thinking and images aside)."""
    calls = tuple(ToolCallDecision(b.tool_name, dict(b.arguments)) for b in content if isinstance(b, ToolUseBlock))
    if calls:
        return TurnDecision(tool_calls=calls)
    return TurnDecision(answer="".join(b.text for b in content if isinstance(b, TextBlock)))


__all__ = ["ToolCallDecision", "TurnDecision", "decision_of"]
