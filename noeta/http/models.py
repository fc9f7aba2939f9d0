"""The HTTP API's request and response bodies as pydantic models: FastAPI validates what comes in
against them (strict types, unknown fields refused), serializes what goes out through them, and
generates the OpenAPI document from them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from noeta.client.client import PendingApproval
from noeta.client.options import Options
from noeta.client.visibility import TaskInfo, TaskSummary
from noeta.protocols.activity_options import ACTIVITY_KINDS, ActivityOptions
from noeta.protocols.budget import UsageLimits
from noeta.protocols.names import DEFAULT_INDEX_INTERVAL_SECONDS
from noeta.protocols.statuses import TASK_STATUSES, TaskStatus
from noeta.protocols.task import ApprovalRequest, TaskResult

Number = StrictInt | StrictFloat


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ActivityOptionsBody(Request):
    """The ``ActivityOptions`` of one kind of activity (``null`` = the default, docs/retries.md)."""

    start_to_close_seconds: Number | None = None
    schedule_to_close_seconds: Number | None = None
    heartbeat_seconds: Number | None = None
    retry_initial_seconds: Number | None = None
    retry_backoff_coefficient: Number | None = None
    retry_max_seconds: Number | None = None

    def to_options(self) -> ActivityOptions:
        return ActivityOptions(**self.model_dump(exclude_none=True))


class TaskOptions(Request):
    """The ``Options`` a JSON client may set (``null`` = the default). Guards, validators and an
    output model are named: the worker's registry must have them."""

    system_prompt: StrictStr | None = None
    model: StrictStr | None = Field(default=None, description="model name for the provider (default: the provider's)")
    provider: StrictStr | None = Field(
        default=None, description="registry name of a provider on the worker, e.g. 'default'"
    )
    allowed_tools: list[StrictStr] | None = Field(default=None, description="names of tools registered on the worker")
    guards: list[StrictStr] | None = Field(default=None, description="names of guards registered on the worker")
    validators: list[StrictStr] | None = Field(default=None, description="names of validators registered on the worker")
    output_schema: dict[str, Any] | StrictStr | None = Field(
        default=None,
        description="a JSON Schema object, or the 'module:QualName' of an output model registered on the worker",
    )
    max_turns: StrictInt | None = None
    max_retries: StrictInt | None = None
    temperature: Number | None = None
    max_tokens: StrictInt | None = None
    model_timeout_seconds: Number | None = None
    tool_timeout_seconds: Number | None = None
    model_activity: ActivityOptionsBody | None = Field(default=None, description="timeouts, heartbeat, backoff of model calls")
    tool_activity: ActivityOptionsBody | None = Field(default=None, description="the same for tool calls")
    mcp_activity: ActivityOptionsBody | None = Field(default=None, description="the same for remote MCP tools")
    guard_activity: ActivityOptionsBody | None = Field(default=None, description="the same for guard checks")
    validator_activity: ActivityOptionsBody | None = Field(default=None, description="the same for output validation")
    approval_timeout_seconds: Number | None = None
    max_history_events: StrictInt | None = None
    rate_limit_wait_seconds: Number | None = Field(
        default=None,
        description="most time one call may wait on rate limits in all (default 600; not counted as retries)",
    )
    index_interval_seconds: Number | None = Field(
        default=None, description=f"refresh the turn and token search attributes at most this often (default {DEFAULT_INDEX_INTERVAL_SECONDS:g})"
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="free-form; keys in NOETA_INDEXED_METADATA are searchable"
    )
    provider_retries: StrictInt | None = Field(
        default=None, description="retries of a model call (default: max_retries)"
    )
    tool_retries: StrictInt | None = Field(default=None, description="retries of a tool call (default: max_retries)")
    validate_tool_input: StrictBool | None = Field(
        default=None, description="check tool arguments against input_schema"
    )
    thinking: dict[str, Any] | None = Field(
        default=None, description='extended thinking: {"type": "enabled", "budget_tokens": N}'
    )
    effort: StrictStr | None = Field(default=None, description="reasoning effort for providers that take one")
    mcp_servers: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="remote MCP servers (stdio or streamable HTTP) by alias; secrets as ${MCP_*} references",
    )
    scope: dict[str, Any] | None = Field(default=None, description="the task's scope data (equip_scope)")
    scope_schema: dict[str, Any] | None = Field(default=None, description="a JSON Schema the scope must satisfy")
    limits: dict[str, Any] | None = Field(
        default=None, description='usage limits, e.g. {"max_cost_usd": 0.5, "max_tool_calls": 20}'
    )

    def to_options(self) -> Options:
        """``Options`` (which checks ranges and schemas: a ConfigurationError names the problem)."""
        given = self.model_dump(exclude_none=True)
        if "limits" in given:
            given["limits"] = UsageLimits.from_dict(given["limits"])
        for kind in ACTIVITY_KINDS:
            body = getattr(self, kind)
            if body is not None:
                given[kind] = body.to_options()
        return Options(**given)


class StartTask(Request):
    goal: StrictStr
    keep_open: StrictBool = False
    task_id: StrictStr | None = Field(default=None, description="default: a new random id; must not contain '/'")
    task_queue: StrictStr | None = Field(default=None, description="default: the server's (NOETA_TASK_QUEUE)")
    options: TaskOptions | None = None


class Goal(Request):
    goal: StrictStr


class Approval(Request):
    call_id: StrictStr
    approved: StrictBool = True
    reason: StrictStr | None = None
    approver: StrictStr | None = None


class Injection(Request):
    text: StrictStr
    origin: Literal["system", "memory"] = "system"


# -- responses -------------------------------------------------------------------------------------


class Response(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class TaskRef(Response):
    task_id: str


class ApprovalAccepted(Response):
    task_id: str
    call_id: str
    approved: bool


class ErrorBody(Response):
    """Every error answer; Noeta errors add their details (e.g. ``provider``, ``status``)."""

    model_config = ConfigDict(extra="allow")
    error: str = Field(description="the exception's name, e.g. TaskNotFoundError")
    message: str


class TaskSummaryOut(Response):
    task_id: str
    status: TaskStatus = Field(description="NoetaStatus: " + ", ".join(TASK_STATUSES))
    goal: str | None
    model: str | None
    turns: int
    tokens_in: int
    tokens_out: int
    started: datetime | None
    closed: datetime | None
    metadata: dict[str, str]
    cost_usd: float = Field(description="US dollars so far (NoetaCostUSD; 0 for an unpriced model)")

    @classmethod
    def of(cls, summary: TaskSummary) -> TaskSummaryOut:
        return cls.model_validate(summary)


class TaskOut(TaskSummaryOut):
    running: bool
    result: TaskResult | None
    error: ErrorBody | None
    current_details: str = Field(default="", description="what a running task does or waits for (needs a live worker)")

    @classmethod
    def of_info(cls, info: TaskInfo, error: dict[str, Any] | None, details: str) -> TaskOut:
        summary = TaskSummaryOut.of(info).model_dump()
        body = ErrorBody.model_validate(error) if error is not None else None
        return cls(**summary, running=info.running, result=info.result, error=body, current_details=details)


class PendingApprovalOut(Response):
    task_id: str
    goal: str | None
    request: ApprovalRequest

    @classmethod
    def of(cls, item: PendingApproval) -> PendingApprovalOut:
        return cls(task_id=item.task_id, goal=item.goal, request=item.request)


class ViewItemOut(Response):
    """One item of the conversation (``as_messages``), its fields beside its type name."""

    model_config = ConfigDict(extra="allow")
    type: Literal["UserMessage", "AssistantMessage", "InjectedMessage", "ToolUse", "ToolResultView", "Result"]


class Health(Response):
    status: str


class Ready(Response):
    status: Literal["ready", "unavailable"]
    temporal: bool


__all__ = [
    "Approval", "ApprovalAccepted", "ErrorBody", "Goal", "Health", "Injection", "PendingApprovalOut", "Ready",
    "StartTask", "TaskOptions", "TaskOut", "TaskRef", "TaskSummaryOut", "ViewItemOut",
]
