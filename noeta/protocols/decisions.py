"""What a :class:`~noeta.protocols.policy.Policy` can decide (the ``Decision`` union)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from noeta.protocols.messages import ToolUseBlock
from noeta.protocols.statuses import GoalStatus


@dataclass(frozen=True, slots=True)
class CallModel:
    """Call the task's provider with the transcript so far."""

    tools: list[str] | None = None
    """Restrict the offered tools to these names (None: every tool of the task)."""
    max_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class CallTools:
    """Invoke these tool calls (in parallel) and append their results to the transcript."""

    calls: list[ToolUseBlock]


@dataclass(frozen=True, slots=True)
class Finish:
    """End the current goal. ``answer`` is the failure reason when ``status`` is "failed"."""

    answer: str
    status: GoalStatus = "completed"


@dataclass(frozen=True, slots=True)
class SpawnSubtask:
    """Run a child agent on ``goal`` and append its answer as a tool result for ``call_id``."""

    goal: str
    call_id: str
    system_prompt: str | None = None
    tools: list[str] | None = None
    scope: dict[str, object] = field(default_factory=dict)
    """Scope equipped for the child (over this task's own, nearest wins)."""
    agent: str | None = None
    """A sub-agent declared in ``Options.subagents``: the child runs with its options (tools,
    prompt, policy, output schema); None: the task's provider and tools, the default policy."""


Decision = Union[CallModel, CallTools, Finish, SpawnSubtask]
