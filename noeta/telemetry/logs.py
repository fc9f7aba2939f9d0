"""Logging: one ``configure_logging``, a context (task id, call id, attempt) on every line, and
expected failures as one line instead of a traceback.

=====================  ==================================================================
variable               meaning
=====================  ==================================================================
``NOETA_LOG_LEVEL``    ``DEBUG``, ``INFO`` (default), ``WARNING``, ``ERROR``
``NOETA_LOG_FORMAT``   ``json`` for one JSON object per line; else ``text``
=====================  ==================================================================

Activities set the context with :func:`log_context`; Temporal's own activity and workflow log
records carry theirs (``temporal_activity`` / ``temporal_workflow``), which is read as well.
Every line is passed through :func:`noeta.security.scrub.scrub` before it is written.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import Any, TextIO

import temporalio.activity
import temporalio.workflow
from temporalio.exceptions import ApplicationError, CancelledError

from noeta.config.context_values import set_within
from noeta.errors import (
    AttemptsExhaustedError,
    ContextLengthError,
    EncryptionKeyError,
    ProviderError,
    ToolRetryableError,
    ToolTimeoutError,
)
from noeta.security.scrub import scrub
from noeta.telemetry.settings import LogSettings

CONTEXT_FIELDS = ("task_id", "call_id", "attempt", "trace_id", "span_id")

#: The trace id of the request being served (set by noeta.telemetry.trace_headers.caller_traceparent).
_caller_trace: contextvars.ContextVar[str | None] = contextvars.ContextVar("noeta_log_caller_trace", default=None)

# Read-only: log_context sets a new mapping, never changes the one in place (nor the shared default).
_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "noeta_log_context", default=MappingProxyType({})
)

#: ApplicationError types that are a normal part of running agents: a provider said no or was
#: busy, a tool asked for a retry, retries ran out. Their stack trace says nothing about them.
#: Derived from the classes, so that renaming one cannot silently drop it from the set.
EXPECTED_ERROR_TYPES = frozenset(
    error.__name__
    for error in (
        ProviderError, ContextLengthError, AttemptsExhaustedError, ToolRetryableError, ToolTimeoutError, EncryptionKeyError,
    )
)


def log_context(**fields: Any) -> AbstractContextManager[None]:
    """Add ``fields`` (task_id, call_id, attempt...) to every log line inside the block."""
    return set_within(_context, {**_context.get(), **{k: v for k, v in fields.items() if v is not None}})


def caller_trace(trace_id: str) -> AbstractContextManager[None]:
    """Lines written inside the block carry ``trace_id`` (when no span of this process is current)."""
    return set_within(_caller_trace, trace_id)


def current_context() -> dict[str, Any]:
    """A copy of the fields :func:`log_context` set for the current task, call and attempt."""
    return dict(_context.get())


def is_expected_failure(exc: BaseException | None) -> bool:
    """Cancellations and Noeta's typed operational errors: logged as one line, no traceback."""
    if isinstance(exc, (asyncio.CancelledError, CancelledError)):
        return True
    return isinstance(exc, ApplicationError) and exc.type in EXPECTED_ERROR_TYPES


class ContextFilter(logging.Filter):
    """Puts task_id / call_id / attempt on each record (from :func:`log_context`, else from
    Temporal's ``temporal_activity`` / ``temporal_workflow`` extras)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Copy the context fields onto ``record`` (never over its own attributes); every record
        passes."""
        fields = dict(_context.get())
        activity = getattr(record, "temporal_activity", None)
        if isinstance(activity, dict):
            fields.setdefault("task_id", activity.get("workflow_id"))
            fields.setdefault("attempt", activity.get("attempt"))
            fields.setdefault("activity", activity.get("activity_type"))
        workflow = getattr(record, "temporal_workflow", None)
        if isinstance(workflow, dict):
            fields.setdefault("task_id", workflow.get("workflow_id"))
        if "trace_id" not in fields:
            fields.update(_trace_fields())
        for key, value in fields.items():
            if value is not None and not hasattr(record, key):
                setattr(record, key, value)
        return True


def _trace_fields() -> dict[str, str]:
    """The current span's trace and span ids (a model or tool call's, inside the task's trace), or
    the trace a ``noeta serve`` request came with; nothing when there is none. OpenTelemetry is only
    read when the program has loaded it."""
    if "opentelemetry.trace" in sys.modules:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
    caller = _caller_trace.get()
    return {"trace_id": caller} if caller else {}


def _failure_line(exc: BaseException) -> str:
    kind = exc.type if isinstance(exc, ApplicationError) and exc.type else type(exc).__name__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{kind}: {text}" if text else kind


#: The fields a text line shows (trace and span ids are for machines: JSON lines only).
TEXT_FIELDS = ("task_id", "call_id", "attempt", "activity")


def _context_of(record: logging.LogRecord, fields: tuple[str, ...] = (*CONTEXT_FIELDS, "activity")) -> dict[str, Any]:
    return {k: getattr(record, k) for k in fields if getattr(record, k, None) is not None}


class TextFormatter(logging.Formatter):
    """``2026-01-01T12:00:00.123Z WARNING logger [task_id=… call_id=… attempt=2] message``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one scrubbed line; an expected failure is summed up on it, any other error
        adds its traceback."""
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        if exc is not None and is_expected_failure(exc):
            message = f"{message}: {_failure_line(exc)}"
            trace = ""
        else:
            trace = self.formatException(record.exc_info) if record.exc_info else ""
        context = " ".join(f"{k}={v}" for k, v in _context_of(record, TEXT_FIELDS).items())
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = f"{when} {record.levelname} {record.name}" + (f" [{context}]" if context else "") + f" {message}"
        return scrub(line + ("\n" + trace if trace else ""))


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, context fields, error."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one scrubbed JSON object; an unexpected error adds its traceback."""
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context_of(record),
        }
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            entry["error"] = _failure_line(exc)
            if not is_expected_failure(exc):
                entry["traceback"] = self.formatException(record.exc_info)  # type: ignore[arg-type]
        # Each value is scrubbed before it is encoded: in the JSON text a secret's quotes and
        # backslashes are escaped, and `password="…"` no longer reads as an assignment.
        return json.dumps({k: _scrubbed(v) for k, v in entry.items()}, ensure_ascii=False)


def _scrubbed(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(value if isinstance(value, str) else str(value))


_HANDLER_NAME = "noeta"


def json_logging() -> bool:
    """Whether Noeta's handler is installed on the root logger and writes JSON: then every line a
    long-running command writes should be a log record (noeta.cli.lifecycle.announce)."""
    return any(h.get_name() == _HANDLER_NAME and isinstance(h.formatter, JSONFormatter) for h in logging.getLogger().handlers)


def handler_installed() -> bool:
    """Whether :func:`configure_logging` installed Noeta's handler on the root logger: servers
    (uvicorn) then leave their loggers to it instead of installing plain-text handlers of their own."""
    return any(h.get_name() == _HANDLER_NAME for h in logging.getLogger().handlers)


def configure_logging(
    level: str | int | None = None, json_format: bool | None = None, stream: TextIO | None = None
) -> logging.Handler:
    """Install Noeta's handler on the root logger (replacing one installed before) and return it.
    ``level``/``json_format`` default to ``NOETA_LOG_LEVEL`` / ``NOETA_LOG_FORMAT``."""
    if level is None or json_format is None:
        settings = LogSettings()
        level = settings.level if level is None else level
        json_format = settings.json_format if json_format is None else json_format
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JSONFormatter() if json_format else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Temporal's loggers append a Python dict of the activity's or workflow's details to each
    # message; the handler puts the same context on the line (task_id, attempt, activity) already.
    temporalio.activity.logger.activity_info_on_message = False
    temporalio.workflow.logger.workflow_info_on_message = False
    return handler
