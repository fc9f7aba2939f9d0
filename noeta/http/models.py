"""The HTTP API's request and response bodies as pydantic models: FastAPI validates what comes in
against them (strict types, unknown fields refused), serializes what goes out through them, and
generates the OpenAPI document from them.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, create_model

from noeta.client.client import PendingApproval
from noeta.client.inspection import ApprovalsInbox
from noeta.client.options import Options
from noeta.client.task_input import Fallback
from noeta.client.settings_body import TaskSettingsBody, attribute_docs
from noeta.client.visibility import TaskInfo, TaskSummary
from noeta.protocols.statuses import IfBusy
from noeta.protocols.task import ApprovalRequest, TaskResult


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FallbackProvider(Request):
    """A provider a task may fall back to: a worker's provider by registry name, and its model."""
    provider: StrictStr = Field(description="registry name of a provider on the worker")
    model: StrictStr | None = Field(default=None, description="the model to ask there (null: its default)")


class TaskOptions(TaskSettingsBody):
    """The ``Options`` a JSON client may set (``null`` = the default). Every task setting comes from
    its one declaration (``TaskSettings``, through ``TaskSettingsBody``); only what names objects on
    the worker is written here. Guards, validators and an output model are named: the worker's
    registry must have them."""

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
    mcp_servers: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="remote MCP servers (stdio or streamable HTTP) by alias; secrets as ${MCP_*} references",
    )
    scope: dict[str, Any] | None = Field(default=None, description="the task's scope data (equip_scope)")
    scope_schema: dict[str, Any] | None = Field(default=None, description="a JSON Schema the scope must satisfy")
    fallback_providers: list[FallbackProvider] | None = Field(
        default=None, description="providers to move to, in order, when the task's provider fails (docs/long-running.md)"
    )

    def to_options(self) -> Options:
        """``Options`` (which checks ranges and schemas: a ConfigurationError names the problem)."""
        own = self.model_dump(exclude_none=True, exclude={*self.settings_fields(), "fallback_providers"})
        if self.fallback_providers is not None:
            own["fallback_providers"] = [Fallback(f.provider, f.model) for f in self.fallback_providers]
        return Options(**self.to_settings(), **own)


class StartTask(Request):
    """Start a task: its first goal, and its options (defaults when absent)."""
    goal: StrictStr
    keep_open: StrictBool = False
    task_id: StrictStr | None = Field(default=None, description="default: a new random id; must not contain '/'")
    task_queue: StrictStr | None = Field(default=None, description="default: the server's (NOETA_TASK_QUEUE)")
    options: TaskOptions | None = None
    agent: StrictStr | None = Field(
        default=None,
        description="start as this agent of the server's catalog (NOETA_AGENTS): 'triage' (its current or ramping "
        "version) or 'triage@2'; options given override its settings; unknown: 422 ConfigurationError",
    )


class ForkTask(Request):
    """Fork a task from one of its model turns: the turn to decide anew, and the options that
    change (``null`` or absent: the task's recorded ones)."""
    at_turn: StrictInt = Field(description="the source's model turn the fork decides anew (from 1)")
    options: TaskOptions | None = None
    goal: StrictStr | None = Field(default=None, description="a message of the human's added at the fork point")
    task_id: StrictStr | None = Field(default=None, description="the fork's id (default: a new random id; no '/')")
    task_queue: StrictStr | None = Field(default=None, description="default: the task queue the source was started on")
    agent: StrictStr | None = Field(
        default=None, description="continue as this agent version of the server's catalog (NOETA_AGENTS), options over it"
    )


class Goal(Request):
    """The next goal of a keep_open task."""
    goal: StrictStr
    if_busy: IfBusy = Field(
        default="enqueue",
        description='while another goal runs: "enqueue" (after it), "reject" (409 TaskBusyError), '
        '"interrupt" (it ends at once) or "steer" (the message joins it before its next model call)',
    )


class ThreadMessage(Request):
    """A message to a conversation thread: its keep-open task is started with ``options`` if it
    does not exist."""
    message: StrictStr
    request_id: StrictStr | None = Field(
        default=None, description="the same id again starts no second task and sends nothing twice (default: new)"
    )
    if_busy: IfBusy = Field(default="enqueue", description="as for a goal")
    task_queue: StrictStr | None = Field(default=None, description="for a new thread; default: the server's")
    options: TaskOptions | None = None


class Approval(Request):
    """The answer to an action waiting for approval: approve it (the default) or refuse it, with an
    optional reason; ``arguments`` approves a tool call with these arguments instead of the
    proposed ones. The approver recorded is the API key's name."""
    call_id: StrictStr
    approved: StrictBool = True
    reason: StrictStr | None = None
    approver: StrictStr | None = None
    """Deprecated: the approver is the API key's name; any other value is refused (422)."""
    arguments: dict[str, Any] | None = None


class Injection(Request):
    """Context for the model at its next step, as a user-channel message of origin system or memory.
    """
    text: StrictStr
    origin: Literal["system", "memory"] = "system"


# -- responses -------------------------------------------------------------------------------------


class Response(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class TaskRef(Response):
    """The task an operation applies to."""
    task_id: str


class ApprovalAccepted(Response):
    """The answer to an approval, as accepted."""
    task_id: str
    call_id: str
    approved: bool


class ErrorBody(Response):
    """Every error answer; Noeta errors add their details (e.g. ``provider``, ``status``)."""

    model_config = ConfigDict(extra="allow")
    error: str = Field(description="the exception's name, e.g. TaskNotFoundError")
    message: str


def response_fields(cls: type[Any]) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` as pydantic fields of a response: the same names, types
    and defaults, and the docstrings under them as descriptions (``create_model`` keywords)."""
    hints, docs = typing.get_type_hints(cls), attribute_docs(cls)
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(cls):
        if item.default_factory is not dataclasses.MISSING:
            info = Field(default_factory=item.default_factory, description=docs.get(item.name))
        else:
            info = Field(default=item.default if item.default is not dataclasses.MISSING else ..., description=docs.get(item.name))
        fields[item.name] = (hints[item.name], info)
    return fields


# A task in a list has TaskSummary's fields, derived from it (type checkers see Response).
if TYPE_CHECKING:
    _Summary = Response
else:
    _Summary = create_model("TaskSummaryFields", __base__=Response, **response_fields(TaskSummary))


class TaskSummaryOut(_Summary):
    """A task as the task list shows it: status, goal, model, turns, tokens, times, indexed metadata
    and cost (the fields of noeta.client.visibility.TaskSummary), and its Temporal UI page."""
    ui_url: str | None = Field(
        default=None, description="the task's page in the Temporal UI (NOETA_TEMPORAL_UI, or the embedded server's UI)"
    )

    @classmethod
    def of(cls, summary: TaskSummary, ui_url: str | None = None) -> TaskSummaryOut:
        """The summary as a response body, with the task's Temporal UI page when known."""
        return cls.model_validate(summary).model_copy(update={"ui_url": ui_url})


class TaskOut(TaskSummaryOut):
    """One task: its summary, whether it runs, its result or error, and what it is doing now."""
    running: bool
    result: TaskResult | None
    error: ErrorBody | None
    current_details: str = Field(default="", description="what a running task does or waits for (needs a live worker)")

    @classmethod
    def of_info(cls, info: TaskInfo, error: dict[str, Any] | None, details: str, ui_url: str | None = None) -> TaskOut:
        """The task's body from its description, error body, current details and UI page."""
        summary = TaskSummaryOut.of(info, ui_url).model_dump()
        body = ErrorBody.model_validate(error) if error is not None else None
        return cls(**summary, running=info.running, result=info.result, error=body, current_details=details)


class PendingApprovalOut(Response):
    """An action waiting for approval, with its task and that task's goal."""
    task_id: str
    goal: str | None
    request: ApprovalRequest

    @classmethod
    def of(cls, item: PendingApproval) -> PendingApprovalOut:
        """The pending approval as a response body."""
        return cls(task_id=item.task_id, goal=item.goal, request=item.request)


class UnreadableTaskOut(Response):
    """A task waiting for a human whose approvals the server could not read, and why."""
    task_id: str
    error: str
    """The error's type, e.g. ``EncryptionKeyError`` (a key this server lacks)."""
    message: str


class ApprovalsInboxOut(Response):
    """The approvals inbox: the actions the server could read, and the waiting tasks it could not
    (named instead of left out silently)."""
    waiting: list[PendingApprovalOut]
    unreadable: list[UnreadableTaskOut]

    @classmethod
    def of(cls, inbox: ApprovalsInbox) -> ApprovalsInboxOut:
        """The client's inbox as a response body."""
        return cls(
            waiting=[PendingApprovalOut.of(p) for p in inbox],
            unreadable=[UnreadableTaskOut(task_id=u.task_id, error=type(u.error).__name__, message=str(u.error))
                        for u in inbox.unreadable],
        )


class ViewItemOut(Response):
    """One item of the conversation (``as_messages``), its fields beside its type name."""

    model_config = ConfigDict(extra="allow")
    type: Literal[
        "UserMessage", "AssistantMessage", "InjectedMessage", "ToolUse", "ToolResultView", "Result"
    ]


class Health(Response):
    """Liveness: always ``ok``."""
    status: str


class Ready(Response):
    """Readiness, and whether Temporal answered its health check."""
    status: Literal["ready", "unavailable"]
    temporal: bool


__all__ = [
    "Approval", "ApprovalAccepted", "ErrorBody", "Goal", "Health", "Injection", "PendingApprovalOut", "Ready",
    "StartTask", "TaskOptions", "TaskOut", "TaskRef", "TaskSummaryOut", "ViewItemOut",
]
