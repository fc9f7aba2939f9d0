"""What a Policy knows about the task it decides for (stable within a task)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from noeta.protocols.scope import validate_scope
from noeta.protocols.tool import ToolSpec

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class StepContext:
    """The task a policy decides for: ids, model, tools, limits, system prompt and metadata (stable
    within a task)."""
    task_id: str
    trace_id: str
    model: str | None
    tools: list[ToolSpec]
    """The task's tools as recorded at start."""
    max_turns: int
    """Model calls allowed per goal; the engine ends a goal as failed beyond it."""
    system_prompt: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """``Options.metadata`` of the task."""
    scope: Mapping[str, Any] = field(default_factory=dict)
    """The merged scope of the task and its parents (nearest level wins)."""
    subagents: tuple[str, ...] = ()
    """Names of the sub-agents the task declares (the LLM policy spawns them when the model calls them)."""

    def expect_scope(self, schema: type[M]) -> M:
        """The scope validated by ``schema`` (defaults applied, deep-frozen); raises ScopeError."""
        return validate_scope(schema, self.scope)
