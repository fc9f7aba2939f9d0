"""The HTTP API's endpoints on FastAPI: each handler takes typed parameters and a pydantic body
(:mod:`noeta.http.models`; FastAPI validates both and the exception handlers of
:mod:`noeta.http.errors` answer what fails), calls one :class:`~noeta.client.client.AsyncClient`
method (which owns every Temporal detail and translates "no such task" / "has ended" into typed
errors), and returns a response model. ``health`` needs no key; ``api`` is behind the request guard.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from pydantic import BeforeValidator
from pydantic_core import PydanticUseDefault, to_jsonable_python

from noeta.client.audit import AuditEntry
from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError
from noeta.http import models
from noeta.http.bodies import BoundedRoute
from noeta.http.errors import error_body
from noeta.http.openapi import AUTHENTICATED, answers
from noeta.http.quotas import SpendQuotas
from noeta.http.sse import EventStream, delta_stream, envelope_stream
from noeta.http.task_paths import TASK_PATH
from noeta.http.tenancy import Approver, Injector, Reader, Starter, identity, own_task, started_here
from noeta.protocols.statuses import TaskStatus
from noeta.protocols.task import ApprovalRequest, TaskResult
from noeta.security.http_guard import ANONYMOUS_KEY_ID, KEY_ID_STATE

logger = logging.getLogger(__name__)

#: Seconds /readyz waits for the Temporal frontend's health check.
READY_TIMEOUT_SECONDS = 5.0
MAX_LIST_LIMIT = 1000


@dataclass(frozen=True)
class AppState:
    """What the handlers share (``app.state.noeta``)."""

    client: AsyncClient
    keepalive_seconds: float
    quotas: SpendQuotas


def app_state(request: Request) -> AppState:
    """The app's :class:`AppState` (a dependency)."""
    return request.app.state.noeta  # type: ignore[no-any-return]


def api_key_id(request: Request) -> str:
    """The id of the API key the request came with (the guard sets it), for spend quotas."""
    return getattr(request.state, KEY_ID_STATE, ANONYMOUS_KEY_ID)


def _blank_is_default(value: Any) -> Any:
    # `?limit=` or an empty Last-Event-ID means "not given", as it always has.
    if isinstance(value, str) and not value.strip():
        raise PydanticUseDefault()
    return value.strip() if isinstance(value, str) else value


State = Annotated[AppState, Depends(app_state)]
KeyId = Annotated[str, Depends(api_key_id)]
TaskId = Annotated[str, Path(description="the task's id")]
Limit = Annotated[
    int, Query(ge=1, le=MAX_LIST_LIMIT, description="most items returned"), BeforeValidator(_blank_is_default)
]

health = APIRouter(tags=["health"], route_class=BoundedRoute)
api = APIRouter(dependencies=AUTHENTICATED, route_class=BoundedRoute)


def _non_empty(value: str | None, name: str) -> str | None:
    if value is not None and not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string")
    return value


def _new_task_id(value: str | None) -> str | None:
    """A task id given for a new task (start or fork): non-empty, without '/'."""
    task_id = _non_empty(value, "task_id")
    if task_id is not None and "/" in task_id:
        raise ConfigurationError("task_id must not contain '/' (it is part of the task's URLs)")
    return task_id


# -- health ------------------------------------------------------------------------------------------


@health.get("/healthz", summary="Liveness (no checks, no authentication)")
async def healthz() -> models.Health:
    """Answers 200 while the server runs."""
    return models.Health(status="ok")


@health.get(
    "/readyz",
    summary="Readiness: Temporal is reachable",
    responses={503: {"model": models.Ready, "description": "Temporal unreachable"}},
)
async def readyz(state: State, response: Response) -> models.Ready:
    """Answers 200 when Temporal's frontend passes its health check in time, else 503."""
    try:
        ok = await asyncio.wait_for(state.client.temporal.service_client.check_health(), READY_TIMEOUT_SECONDS)
    except Exception:  # unreachable, timed out: not ready (details stay in the log)
        logger.warning("readiness check: Temporal is not reachable", exc_info=True)
        ok = False
    response.status_code = 200 if ok else 503
    return models.Ready(status="ready" if ok else "unavailable", temporal=ok)


# -- tasks -------------------------------------------------------------------------------------------


@api.post("/tasks", status_code=201, tags=["tasks"], summary="Start a task", responses=answers(401, 409, 413, 422, 429))
async def start_task(body: models.StartTask, state: State, key: KeyId, who: Starter) -> models.TaskRef:
    """Start a task with the body's goal and options (or as the body's agent); answers its id. The
    task belongs to the key's tenant. With spend quotas, a key that has spent its quota gets 429, and the task's cost
    limit is lowered to what the key has left today."""
    if not body.goal.strip():
        raise ConfigurationError("goal must be a non-empty string")
    task_id = _new_task_id(body.task_id)
    options = (body.options or models.TaskOptions()).to_options()
    if body.agent is not None:  # resolved here, so that the quota caps the agent version's limits
        task_id, options = state.client.agent_options(body.agent, options, task_id)
    options = state.quotas.cap(options, await state.quotas.admit(state.client, key))  # 429 once spent
    task_id = await state.client.start(
        body.goal, options, task_id=task_id, keep_open=body.keep_open,
        task_queue=_non_empty(body.task_queue, "task_queue"), api_key_id=key, tenant=who.tenant,
        identity=identity(who),
    )
    if body.task_id is not None:
        await started_here(state.client, who, task_id)
    return models.TaskRef(task_id=task_id)


@api.post(
    f"{TASK_PATH}/fork", status_code=201, tags=["tasks"],
    summary="Fork a task from one of its model turns, decided anew with other options", responses=answers(401, 404, 409, 413, 422, 429),
)
async def fork_task(task_id: TaskId, body: models.ForkTask, state: State, key: KeyId, who: Starter) -> models.TaskRef:
    """Start a new task whose transcript is this task's up to model turn ``at_turn`` (tool calls
    before it are not run again), continuing with the body's options where given and the task's
    recorded ones otherwise; answers the fork's id. A turn the task has not recorded: 422
    TurnNotFoundError naming the valid range. Spend quotas apply as to a new task."""
    await own_task(state.client, who, task_id)
    fork_id = _new_task_id(body.task_id)
    options = (body.options or models.TaskOptions()).to_options()
    if body.agent is not None:  # a fork onto another agent version; the quota caps its limits
        fork_id, options = state.client.agent_options(body.agent, options, fork_id)
    options = state.quotas.cap(options, await state.quotas.admit(state.client, key))  # 429 once spent
    fork_id = await state.client.fork(
        task_id, at_turn=body.at_turn, options=options, goal=body.goal, task_id=fork_id,
        task_queue=_non_empty(body.task_queue, "task_queue"), api_key_id=key, tenant=who.tenant,
        identity=identity(who),
    )
    if body.task_id is not None:
        await started_here(state.client, who, fork_id)
    return models.TaskRef(task_id=fork_id)


@api.get("/tasks", tags=["tasks"], summary="List tasks, newest first", responses=answers(401, 422))
async def list_tasks(
    state: State,
    who: Reader,
    status: Annotated[TaskStatus | None, Query(description="NoetaStatus"), BeforeValidator(_blank_is_default)] = None,
    search: Annotated[str | None, Query(description="words of the goal (full-text on NoetaGoal)")] = None,
    model: Annotated[str | None, Query(description="exact NoetaModel")] = None,
    metadata: Annotated[list[str] | None, Query(description="key=value of an indexed metadata key (repeatable)")] = None,
    limit: Limit = 50,
) -> list[models.TaskSummaryOut]:
    """The key's tenant's tasks matching the filters, newest first, at most ``limit``."""
    wanted = {}
    for item in metadata or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError(f"metadata filters look like key=value, got {item!r}")
        wanted[key] = value
    tasks = await state.client.list_tasks(
        status, limit, search=search or None, model=model or None, metadata=wanted, tenant=who.tenant
    )
    return [models.TaskSummaryOut.of(t, state.client.task_url(t.task_id)) for t in tasks]


@api.get(
    TASK_PATH, tags=["tasks"], summary="A task: status, usage, current details, result or error",
    responses=answers(401, 404),
)
async def get_task(task_id: TaskId, state: State, who: Reader) -> models.TaskOut:
    """The task's status, usage and result or error; a running task also says what it does now."""
    await own_task(state.client, who, task_id)
    info = await state.client.describe(task_id)
    details = await _details(state.client, task_id) if info.running else ""
    error = error_body(info.error) if info.error else None
    return models.TaskOut.of_info(info, error, details, state.client.task_url(task_id))


async def _details(client: AsyncClient, task_id: str) -> str:
    """What a running task does now; when no worker polls its queue, that (and how to start one)."""
    notice = await client.waiting_for_worker(task_id)
    return f"**no worker** · {notice}" if notice else await _current_details(client, task_id)


async def _current_details(client: AsyncClient, task_id: str) -> str:
    """Asks a live worker; a page must not hang when none is polling."""
    try:
        return await asyncio.wait_for(client.current_details(task_id), 2.0)
    except Exception:
        return ""


@api.post(
    f"{TASK_PATH}/goals", tags=["tasks"], summary="Send the next goal of a keep_open task (waits for its result)",
    responses=answers(401, 404, 409, 413, 422, 429),
)
async def send_goal(task_id: TaskId, body: models.Goal, state: State, key: KeyId, who: Starter) -> TaskResult:
    """Send the next goal to a keep_open task and wait for its result (spend quotas are checked
    first)."""
    await own_task(state.client, who, task_id)
    await state.quotas.admit(state.client, key)
    return await state.client.send_goal(task_id, body.goal, identity=identity(who), if_busy=body.if_busy)


@api.post(
    f"{TASK_PATH}/cancel", status_code=202, tags=["tasks"], summary="Cancel a running task",
    responses=answers(401, 404, 409),
)
async def cancel_task(task_id: TaskId, state: State, who: Starter) -> models.TaskRef:
    """Ask a running task to cancel."""
    await own_task(state.client, who, task_id)
    await state.client.cancel(task_id, identity=identity(who))
    return models.TaskRef(task_id=task_id)


@api.post(
    f"{TASK_PATH}/close", status_code=202, tags=["tasks"],
    summary="Let a keep_open task end after its queued goals", responses=answers(401, 404, 409),
)
async def close_task(task_id: TaskId, state: State, who: Starter) -> models.TaskRef:
    """Let a keep_open task end once its queued goals are done."""
    await own_task(state.client, who, task_id)
    await state.client.close_task(task_id, identity=identity(who))
    return models.TaskRef(task_id=task_id)


@api.post(
    f"{TASK_PATH}/inject", status_code=202, tags=["tasks"], summary="Give the model context at its next step",
    responses=answers(401, 404, 409, 413, 422),
)
async def inject(task_id: TaskId, body: models.Injection, state: State, who: Injector) -> models.TaskRef:
    """Add a message the model reads at its next step."""
    await own_task(state.client, who, task_id)
    await state.client.inject(task_id, body.text, body.origin, identity=identity(who))
    return models.TaskRef(task_id=task_id)


@api.get(
    f"{TASK_PATH}/messages", tags=["tasks"], summary="The conversation (as_messages)",
    response_model=list[models.ViewItemOut], responses=answers(401, 404),
)
async def messages(task_id: TaskId, state: State, who: Reader) -> list[dict[str, Any]]:
    """The task's conversation, each item with its type name."""
    await own_task(state.client, who, task_id)
    items = await state.client.messages(task_id)
    return [{"type": type(item).__name__, **to_jsonable_python(item)} for item in items]


@api.get(
    f"{TASK_PATH}/audit", tags=["tasks"], summary="Who started, approved, edited, denied, injected, cancelled",
    responses=answers(401, 404),
)
async def audit(task_id: TaskId, state: State, who: Reader) -> list[AuditEntry]:
    """What people did to the task, oldest first, each with the identity that did it (an API
    key's name, the CLI's user, or a Temporal caller identity), read from the task's history."""
    await own_task(state.client, who, task_id)
    return await state.client.audit(task_id)


# -- approvals ---------------------------------------------------------------------------------------


@api.get(
    "/approvals", tags=["approvals"], summary="Every action waiting for a human (the approvals inbox)",
    responses=answers(401, 422),
)
async def all_pending_approvals(state: State, who: Reader, limit: Limit = 100) -> models.ApprovalsInboxOut:
    """Every action of the key's tenant waiting for a human, across the tasks whose status is
    awaiting_approval (at most ``limit`` of them), the longest-waiting first: each with when it
    started waiting, its deadline, its risk and the guard's reason; and in ``unreadable`` each
    waiting task this server could not read (a key it lacks...), with why."""
    return models.ApprovalsInboxOut.of(await state.client.approvals_waiting(limit, tenant=who.tenant))


@api.get(
    f"{TASK_PATH}/approvals", tags=["approvals"], summary="Actions of the task waiting for a human",
    responses=answers(401, 404),
)
async def pending_approvals(task_id: TaskId, state: State, who: Reader) -> list[ApprovalRequest]:
    """The task's actions waiting for a human (none once it ended)."""
    await own_task(state.client, who, task_id)
    return await state.client.pending_approvals(task_id)


@api.post(
    f"{TASK_PATH}/approvals", status_code=202, tags=["approvals"], summary="Approve or refuse a waiting action",
    responses=answers(401, 404, 409, 413, 422),
)
async def approve(task_id: TaskId, body: models.Approval, state: State, who: Approver) -> models.ApprovalAccepted:
    """Approve or refuse the task's action ``call_id`` (``arguments``: approve the tool call with
    these arguments instead). The approver recorded is the API key's name."""
    if not body.call_id.strip():
        raise ConfigurationError("call_id must be a non-empty string")
    if body.approver is not None and body.approver != who.name:
        raise ConfigurationError(f"the approver is the API key's name ({who.name!r}); leave approver out")
    await own_task(state.client, who, task_id)
    await state.client.approve(
        task_id, body.call_id, body.approved, _non_empty(body.reason, "reason"), identity(who), arguments=body.arguments
    )
    return models.ApprovalAccepted(task_id=task_id, call_id=body.call_id, approved=body.approved)


# -- streams -----------------------------------------------------------------------------------------


@api.get(
    f"{TASK_PATH}/events", tags=["streams"], response_class=EventStream,
    summary="The event log as Server-Sent Events (live with follow=true)", responses=answers(401, 404, 422),
)
async def events(
    task_id: TaskId,
    state: State,
    who: Reader,
    after_seq: Annotated[
        int, Query(ge=0, description="only envelopes with a larger seq"), BeforeValidator(_blank_is_default)
    ] = 0,
    follow: Annotated[bool, Query(description="stay open until the task ends"), BeforeValidator(_blank_is_default)] = True,
    last_event_id: Annotated[
        int | None,
        Header(alias="Last-Event-ID", ge=0, description="resume after this seq (EventSource sends it)"),
        BeforeValidator(_blank_is_default),
    ] = None,
) -> EventStream:
    """The task's event envelopes after ``after_seq`` (or the Last-Event-ID header) as Server-Sent
    Events; with follow, the stream stays open until the task ends."""
    if last_event_id is not None:  # a reconnecting EventSource keeps its URL: the later position wins
        after_seq = max(after_seq, last_event_id)
    await own_task(state.client, who, task_id)  # an unknown task is a 404, not an empty stream
    return EventStream(envelope_stream(state.client, task_id, after_seq, follow, state.keepalive_seconds))


@api.get(
    f"{TASK_PATH}/deltas", tags=["streams"], response_class=EventStream,
    summary="Streamed model text (delta events) until the task ends", responses=answers(401, 404),
)
async def deltas(
    task_id: TaskId,
    state: State,
    who: Reader,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID", pattern=r"^[0-9]{1,18}:[0-9]{1,9}$",
            description="resume after this delta (its SSE id, OFFSET:INDEX; EventSource sends it)",
        ),
        BeforeValidator(_blank_is_default),
    ] = None,
) -> EventStream:
    """The model's text of the task as it is generated, as Server-Sent ``delta`` events, until the
    task ends; every piece of every call, or those after the Last-Event-ID's delta."""
    await own_task(state.client, who, task_id)  # an unknown task is a 404, not an empty stream
    after = tuple(int(n) for n in last_event_id.split(":")) if last_event_id else None
    return EventStream(delta_stream(state.client, task_id, state.keepalive_seconds, after))
