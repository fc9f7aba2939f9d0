"""Workflow history -> EventEnvelopes: :func:`project` and the incremental :class:`Projector`.

One object per module, each with its own state, wired together by the projector: ``log`` (the
envelopes and their numbering), ``transcript`` (MessagesAppended and the tool calls they propose),
``rounds`` (a tool round's results as one message), ``goals``, ``approvals``, ``subtasks``,
``steps`` (activities: model and tool calls, guards, validation), ``lifecycle`` (start, memos,
end) and ``projector`` (routing history events, and ``project``). ``payloads`` reads payloads and
failures out of history events.
"""

from noeta.client.projection.payloads import decode_first, failure_text, innermost_message
from noeta.client.projection.projector import Projector, project

__all__ = ["Projector", "decode_first", "failure_text", "innermost_message", "project"]
