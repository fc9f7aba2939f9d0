"""Where a forked task starts: the source task's recorded transcript just before one of its model
turns, carried in the fork's :class:`~noeta.protocols.task.TaskInput`.

A fork is a new task whose transcript is its source's up to model turn ``turn`` (numbered as in
:mod:`noeta.protocols.turns`); that turn is decided anew under the fork's own settings. The
transcript is content-addressed, so the fork points at the source's stored head (no body is
copied) plus the messages the source had added since; the tool results in them come from the
record: no tool call before the fork point runs again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from noeta.protocols.messages import ContentRef, Message


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """The recorded request of the source's turn ``turn``: its stored transcript head and the
    messages added since, where the fork's first model call starts."""

    source_task_id: str
    """The task the fork was taken from."""
    turn: int
    """The source's model turn the fork decides anew (task-wide number, from 1)."""
    head: ContentRef | None
    """The source's stored transcript before that turn (None: nothing stored yet, turn 1)."""
    append: list[Message] = field(default_factory=list)
    """The messages the source added since ``head`` (the goal, tool results, injections), and a
    goal given to the fork after them."""
    goal_turns: int = 0
    """Model calls the source had made in that turn's goal before it (the fork's turn count in its
    goal starts there, so ``max_turns`` means what it meant for the source)."""


__all__ = ["ForkPoint"]
