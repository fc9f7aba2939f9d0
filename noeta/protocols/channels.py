"""Content channels as the workflow sees them: each channel's text for a task, and what the
composer put where (recorded in history)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ChannelContent:
    """A content channel's text for one task (from ``Options.content_channels`` / ``context``)."""

    name: str
    text: str
    stable: bool


@dataclass(frozen=True, slots=True)
class ChannelUse:
    """One channel in a context plan: its name, whether it is stable (cached) or volatile, and its
    length in characters."""
    name: str
    stable: bool
    chars: int


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """What the composer put where (recorded in history as ContextPlanComposed)."""

    system_chars: int
    """System prompt plus stable channels: the cached prefix (with the tools)."""
    volatile_chars: int
    """Volatile channels, sent after the transcript, outside the cache."""
    channels: list[ChannelUse] = field(default_factory=list)
