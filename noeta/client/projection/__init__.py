"""Workflow history -> EventEnvelopes: :func:`project` and the incremental :class:`Projector`.

Modules: ``payloads`` (decoding history payloads and failures), ``state`` (envelopes, messages, tool
rounds), ``steps`` (activities: model and tool calls, guards, validation), ``lifecycle`` (start,
goals, approvals, memos, sub-agents, end), ``projector`` (the event dispatch and ``project``).
"""

from noeta.client.projection.payloads import decode_first, failure_text, innermost_message
from noeta.client.projection.projector import Projector, project

__all__ = ["Projector", "decode_first", "failure_text", "innermost_message", "project"]
