"""The worker's activities: the I/O side of AgentWorkflow, one object per worker.

Each concern has its module and adds its activities to :class:`AgentActivities`:
:mod:`~noeta.activities.prepare` (prepare a task, load a new run's transcript, release its
resources), :mod:`~noeta.activities.model_call`, :mod:`~noeta.activities.tool_call` and
:mod:`~noeta.activities.checks` (guards and output validation); what they share is in
:mod:`~noeta.activities._base`. Activity names come from :mod:`noeta.protocols.names`.
"""

from __future__ import annotations

from typing import Any

from noeta.activities._base import THREAD_WAIT_SECONDS, call_maybe_async
from noeta.activities._schema import ParseFailure, argument_problem, check_schema, parse_json_answer
from noeta.activities.checks import CheckActivities
from noeta.activities.model_call import INLINE_ANSWER_LIMIT, ModelCallActivities, reported_model, tool_schema
from noeta.activities.prepare import PrepareActivities
from noeta.activities.tool_call import (
    INLINE_OUTPUT_LIMIT,
    ToolCallActivities,
    checked_result,
    needs_offload,
    tool_callable,
)


class AgentActivities(PrepareActivities, ModelCallActivities, ToolCallActivities, CheckActivities):
    """Every activity AgentWorkflow schedules, served from one registry (``activities()``)."""

    def activities(self) -> list[Any]:
        return [
            self.prepare_task,
            self.call_model,
            self.invoke_tool,
            self.validate_output,
            self.check_guards,
            self.load_transcript,
            self.release_resources,
        ]


__all__ = [
    "INLINE_ANSWER_LIMIT",
    "INLINE_OUTPUT_LIMIT",
    "THREAD_WAIT_SECONDS",
    "AgentActivities",
    "ParseFailure",
    "argument_problem",
    "call_maybe_async",
    "check_schema",
    "checked_result",
    "needs_offload",
    "parse_json_answer",
    "reported_model",
    "tool_callable",
    "tool_schema",
]
