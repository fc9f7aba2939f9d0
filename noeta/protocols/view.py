"""What a Policy sees at each step: the transcript and counters, never I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from noeta.protocols.messages import Message, Usage


@dataclass(frozen=True, slots=True)
class View:
    """What a policy sees at one step: the transcript, usage, turns used and left, and pending
    approvals."""
    transcript: tuple[Message, ...]
    """Every message of the task so far (large tool outputs appear as ContentRefs)."""
    usage: Usage
    """Tokens used by the whole task so far."""
    turn: int
    """Model calls made for the current goal."""
    budget: int
    """Model calls left for the current goal (``max_turns - turn``)."""
    pending_approvals: tuple[str, ...] = field(default_factory=tuple)
    """Call ids of tool calls waiting for a human."""

    @property
    def last(self) -> Message | None:
        """The latest message, or None before the first."""
        return self.transcript[-1] if self.transcript else None
