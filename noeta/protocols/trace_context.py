"""W3C trace context as plain values, for the workflow (which may not import OpenTelemetry) and
the processes around it: parse and write a ``traceparent``, and derive the ids of a task run's
``invoke_agent`` span from the run's ids, so that every replay and every worker computes the same
ones without recording anything.

``traceparent`` is ``00-<trace id, 32 hex>-<parent span id, 16 hex>-<flags, 2 hex>``
(https://www.w3.org/TR/trace-context/).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16
SAMPLED = 1


@dataclass(frozen=True, slots=True)
class SpanRef:
    """A span as another process names it: trace id and span id in lower-case hex, and its flags
    (bit 0: sampled)."""

    trace_id: str
    span_id: str
    flags: int = SAMPLED

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` value naming this span as the parent."""
        return f"00-{self.trace_id}-{self.span_id}-{self.flags:02x}"

    def to_bytes(self) -> bytes:
        """The 25 bytes of the ids and flags (the ``noeta-trace`` header: every scheduled step of a
        traced task carries one, so it is kept small)."""
        return bytes.fromhex(self.trace_id) + bytes.fromhex(self.span_id) + bytes([self.flags & 0xFF])


def span_from_bytes(data: bytes) -> SpanRef | None:
    """The span :meth:`SpanRef.to_bytes` wrote, or None for anything else (or an all-zero id)."""
    if len(data) != 25:
        return None
    trace_id, span_id = data[:16].hex(), data[16:24].hex()
    if trace_id == _INVALID_TRACE or span_id == _INVALID_SPAN:
        return None
    return SpanRef(trace_id, span_id, data[24])


def parse_traceparent(value: object) -> SpanRef | None:
    """The span a ``traceparent`` names, or None when it is missing or malformed (an all-zero id
    is malformed). Only version 00 is read, as the W3C spec asks of a version-00 parser."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value.strip().lower())
    if match is None or match.group(1) == _INVALID_TRACE or match.group(2) == _INVALID_SPAN:
        return None
    return SpanRef(match.group(1), match.group(2), int(match.group(3), 16))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def derived_trace_id(workflow_id: str, first_run_id: str) -> str:
    """The trace of a task no caller put into a trace: the same for all its runs (continue-as-new
    keeps the first run's id), different for a new task under a reused task id."""
    return _digest("trace", workflow_id, first_run_id)[:32]


def derived_span_id(run_id: str) -> str:
    """The ``invoke_agent`` span of one run of a task."""
    span = _digest("invoke_agent", run_id)[:16]
    return span if span != _INVALID_SPAN else "1".rjust(16, "0")


__all__ = ["SAMPLED", "SpanRef", "derived_span_id", "derived_trace_id", "parse_traceparent", "span_from_bytes"]
