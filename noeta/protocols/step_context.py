"""What a Policy knows about the task it decides for (stable within a task)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.tool import ToolSpec


@dataclass(frozen=True)
class StepContext:
    task_id: str
    trace_id: str
    model: str | None
    tools: list[ToolSpec]
    """The task's tools as recorded at start."""
    max_turns: int
    """Model calls allowed per goal; the engine ends a goal as failed beyond it."""
    system_prompt: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
