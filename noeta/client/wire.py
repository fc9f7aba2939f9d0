"""``envelope_to_dict``: the canonical JSON shape of an envelope (what an SSE stream carries).

Stable keys: seq, type, actor, origin, trace_id, causation_id, task_id, timestamp (ISO 8601 or
null), history_event_id, payload (the typed payload as plain JSON values).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

from noeta.protocols.event_log import EventEnvelope


def envelope_to_dict(env: EventEnvelope) -> dict[str, Any]:
    """The envelope as plain JSON values, with the keys listed in the module docstring."""
    return {
        "seq": env.seq,
        "type": env.type,
        "actor": env.actor,
        "origin": env.origin,
        "trace_id": env.trace_id,
        "causation_id": env.causation_id,
        "task_id": env.task_id,
        "timestamp": env.timestamp.isoformat() if env.timestamp else None,
        "history_event_id": env.history_event_id,
        "payload": to_jsonable_python(env.payload),
    }
