"""A forked task's first step: it starts from its source's recorded transcript (see
:mod:`noeta.protocols.forks`) instead of appending its goal."""

from __future__ import annotations

from noeta.protocols.forks import ForkPoint
from noeta.protocols.messages import Message
from noeta.protocols.task import LoadTranscriptInput
from noeta.workflows import steps
from noeta.workflows.run import RunState


async def start_from_fork(run: RunState, fork: ForkPoint) -> None:
    """Make ``fork`` the run's transcript: the source's stored head (read back for the policy's
    view; the model call sends the head itself, so no body is copied) and the messages the source
    had added since, pending for the fork's first model call. Turns continue from the source's."""
    state = run.state
    state.head = fork.head
    state.pending = list(fork.append)
    state.total_turns = fork.turn - 1
    stored: list[Message] = []
    if fork.head is not None:
        summary = f"fork of {fork.source_task_id} at turn {fork.turn}"
        loaded = await steps.load_transcript(run.task, LoadTranscriptInput(head=fork.head), 1, summary)
        stored = loaded.messages
    run.transcript = [*stored, *fork.append]
