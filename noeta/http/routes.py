"""The HTTP API's endpoints: each handler parses its request into a model of
:mod:`noeta.http.models`, calls one :class:`~noeta.client.client.AsyncClient` method (which owns
every Temporal detail and translates "no such task" / "has ended" into typed errors), and answers
with a response model. ``ENDPOINTS`` lists them with what the OpenAPI description needs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError, PayloadTooLargeError
from noeta.http import models
from noeta.http.errors import HTTPError, error_body, validation_message
from noeta.http.quotas import SpendQuotas
from noeta.http.sse import HEADERS, delta_stream, envelope_stream
from noeta.protocols.statuses import TASK_STATUSES
from noeta.protocols.task import ApprovalRequest, TaskResult
from noeta.security.http_guard import ANONYMOUS_KEY_ID, DEFAULT_MAX_BODY, KEY_ID_STATE

logger = logging.getLogger(__name__)

#: Largest request body accepted (Temporal refuses payloads over 2 MiB anyway).
MAX_BODY_BYTES = DEFAULT_MAX_BODY
#: Seconds /readyz waits for the Temporal frontend's health check.
READY_TIMEOUT_SECONDS = 5.0
MAX_LIST_LIMIT = 1000

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class AppState:
    """What the handlers share (``request.app.state.noeta``)."""

    client: AsyncClient
    keepalive_seconds: float
    quotas: SpendQuotas


def _state(request: Request) -> AppState:
    return request.app.state.noeta  # type: ignore[no-any-return]


def _key_id(request: Request) -> str:
    """The id of the API key the request came with (the guard sets it), for spend quotas."""
    return getattr(request.state, KEY_ID_STATE, ANONYMOUS_KEY_ID)


def _json(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(to_jsonable_python(value), status_code=status)


# -- request parsing ---------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_body(request: Request, model: type[M]) -> M:
    """The body as ``model`` (400 malformed JSON, 413 too big, 422 wrong shape)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"request body is over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise PayloadTooLargeError(f"request body is over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(bytes(body) or b"{}", parse_constant=_reject_constant)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise HTTPError(400, type(err).__name__, f"malformed JSON body: {err}") from err
    if not isinstance(data, dict):
        raise ConfigurationError("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigurationError(validation_message(err)) from None


def int_param(value: str | None, name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum or (maximum is not None and number > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigurationError(f"{name} must be {bound}, got {number}")
    return number


def bool_param(value: str | None, name: str, default: bool) -> bool:
    if value is None or value == "":
        return default
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be true or false, got {value!r}")


def _non_empty(value: str | None, name: str) -> str | None:
    if value is not None and not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string")
    return value


# -- handlers ----------------------------------------------------------------------------------------


async def healthz(request: Request) -> Response:
    return _json(models.Health(status="ok"))


async def readyz(request: Request) -> Response:
    try:
        ok = await asyncio.wait_for(_state(request).client.temporal.service_client.check_health(), READY_TIMEOUT_SECONDS)
    except Exception:  # unreachable, timed out: not ready (details stay in the log)
        logger.warning("readiness check: Temporal is not reachable", exc_info=True)
        ok = False
    return _json(models.Ready(status="ready" if ok else "unavailable", temporal=ok), 200 if ok else 503)


async def start_task(request: Request) -> Response:
    body = await read_body(request, models.StartTask)
    if not body.goal.strip():
        raise ConfigurationError("goal must be a non-empty string")
    task_id = _non_empty(body.task_id, "task_id")
    if task_id is not None and "/" in task_id:
        raise ConfigurationError("task_id must not contain '/' (it is part of the task's URLs)")
    state = _state(request)
    options = (body.options or models.TaskOptions()).to_options()
    key = _key_id(request)
    options = state.quotas.cap(options, await state.quotas.admit(state.client, key))  # 429 once spent
    task_id = await state.client.start(
        body.goal, options, task_id=task_id, keep_open=body.keep_open,
        task_queue=_non_empty(body.task_queue, "task_queue"), api_key_id=key,
    )
    return _json(models.TaskRef(task_id=task_id), 201)


async def list_tasks(request: Request) -> Response:
    query = request.query_params
    metadata = {}
    for item in query.getlist("metadata"):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError(f"metadata filters look like key=value, got {item!r}")
        metadata[key] = value
    tasks = await _state(request).client.list_tasks(
        query.get("status") or None,
        int_param(query.get("limit"), "limit", 50, minimum=1, maximum=MAX_LIST_LIMIT),
        search=query.get("search") or None,
        model=query.get("model") or None,
        metadata=metadata,
    )
    return _json([models.TaskSummaryOut.of(t) for t in tasks])


async def get_task(request: Request) -> Response:
    client = _state(request).client
    task_id = request.path_params["task_id"]
    info = await client.describe(task_id)
    details = await _current_details(client, task_id) if info.running else ""
    return _json(models.TaskOut.of_info(info, error_body(info.error) if info.error else None, details))


async def _current_details(client: AsyncClient, task_id: str) -> str:
    """Asks a live worker; a page must not hang when none is polling."""
    try:
        return await asyncio.wait_for(client.current_details(task_id), 2.0)
    except Exception:
        return ""


async def send_goal(request: Request) -> Response:
    state = _state(request)
    body = await read_body(request, models.Goal)
    await state.quotas.admit(state.client, _key_id(request))
    return _json(await state.client.send_goal(request.path_params["task_id"], body.goal))


async def cancel_task(request: Request) -> Response:
    task_id = request.path_params["task_id"]
    await _state(request).client.cancel(task_id)
    return _json(models.TaskRef(task_id=task_id), 202)


async def close_task(request: Request) -> Response:
    task_id = request.path_params["task_id"]
    await _state(request).client.close_task(task_id)
    return _json(models.TaskRef(task_id=task_id), 202)


async def inject(request: Request) -> Response:
    task_id = request.path_params["task_id"]
    body = await read_body(request, models.Injection)
    await _state(request).client.inject(task_id, body.text, body.origin)
    return _json(models.TaskRef(task_id=task_id), 202)


async def pending_approvals(request: Request) -> Response:
    return _json(await _state(request).client.pending_approvals(request.path_params["task_id"]))


async def all_pending_approvals(request: Request) -> Response:
    limit = int_param(request.query_params.get("limit"), "limit", 100, minimum=1, maximum=MAX_LIST_LIMIT)
    return _json([models.PendingApprovalOut.of(p) for p in await _state(request).client.approvals_waiting(limit)])


async def approve(request: Request) -> Response:
    task_id = request.path_params["task_id"]
    body = await read_body(request, models.Approval)
    if not body.call_id.strip():
        raise ConfigurationError("call_id must be a non-empty string")
    await _state(request).client.approve(
        task_id, body.call_id, body.approved, _non_empty(body.reason, "reason"), _non_empty(body.approver, "approver")
    )
    return _json(models.ApprovalAccepted(task_id=task_id, call_id=body.call_id, approved=body.approved), 202)


async def messages(request: Request) -> Response:
    items = await _state(request).client.messages(request.path_params["task_id"])
    return _json([{"type": type(item).__name__, **to_jsonable_python(item)} for item in items])


async def events(request: Request) -> Response:
    state = _state(request)
    task_id = request.path_params["task_id"]
    after_seq = int_param(request.query_params.get("after_seq"), "after_seq", 0)
    last_event_id = request.headers.get("last-event-id", "").strip()
    if last_event_id:
        after_seq = max(after_seq, int_param(last_event_id, "Last-Event-ID", 0))
    follow = bool_param(request.query_params.get("follow"), "follow", True)
    await state.client.is_running(task_id)  # an unknown task is a 404, not an empty stream
    return StreamingResponse(
        envelope_stream(state.client, task_id, after_seq, follow, state.keepalive_seconds),
        media_type="text/event-stream",
        headers=HEADERS,
    )


async def deltas(request: Request) -> Response:
    state = _state(request)
    task_id = request.path_params["task_id"]
    await state.client.is_running(task_id)  # an unknown task is a 404, not an empty stream
    return StreamingResponse(
        delta_stream(state.client, task_id, state.keepalive_seconds),
        media_type="text/event-stream",
        headers=HEADERS,
    )


# -- the table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "query" or "header"
    schema: dict[str, Any]
    description: str
    repeated: bool = False


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Callable[[Request], Awaitable[Response]]
    summary: str
    status: int = 200
    body: type[BaseModel] | None = None
    response: Any = None
    """A pydantic model or a type pydantic can describe; "sse" for an event stream."""
    errors: tuple[int, ...] = ()
    params: tuple[Param, ...] = ()
    tag: str = "tasks"


_LIMIT = Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT}, "most items returned")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/healthz", healthz, "Liveness (no checks, no authentication)", response=models.Health, tag="health"),
    Endpoint("GET", "/readyz", readyz, "Readiness: Temporal is reachable", response=models.Ready, errors=(503,), tag="health"),
    Endpoint("POST", "/tasks", start_task, "Start a task", 201, models.StartTask, models.TaskRef, (409, 413, 422, 429)),
    Endpoint(
        "GET", "/tasks", list_tasks, "List tasks, newest first", response=list[models.TaskSummaryOut], errors=(422,),
        params=(
            Param("status", "query", {"type": "string", "enum": list(TASK_STATUSES)}, "NoetaStatus"),
            Param("search", "query", {"type": "string"}, "words of the goal (full-text on NoetaGoal)"),
            Param("model", "query", {"type": "string"}, "exact NoetaModel"),
            Param("metadata", "query", {"type": "string"}, "key=value of an indexed metadata key", repeated=True),
            _LIMIT,
        ),
    ),
    Endpoint(
        "GET", "/approvals", all_pending_approvals, "Every action waiting for a human (the approvals inbox)",
        response=list[models.PendingApprovalOut], params=(_LIMIT,), tag="approvals",
    ),
    Endpoint("GET", "/tasks/{task_id}", get_task, "A task: status, usage, current details, result or error",
             response=models.TaskOut, errors=(404,)),
    Endpoint("POST", "/tasks/{task_id}/goals", send_goal, "Send the next goal of a keep_open task (waits for its result)",
             body=models.Goal, response=TaskResult, errors=(404, 409, 413, 422, 429)),
    Endpoint("POST", "/tasks/{task_id}/cancel", cancel_task, "Cancel a running task", 202, response=models.TaskRef,
             errors=(404, 409)),
    Endpoint("POST", "/tasks/{task_id}/close", close_task, "Let a keep_open task end after its queued goals", 202,
             response=models.TaskRef, errors=(404, 409)),
    Endpoint("POST", "/tasks/{task_id}/inject", inject, "Give the model context at its next step", 202,
             models.Injection, models.TaskRef, (404, 409, 413, 422)),
    Endpoint("GET", "/tasks/{task_id}/messages", messages, "The conversation (as_messages)",
             response=list[models.ViewItemOut], errors=(404,)),
    Endpoint("GET", "/tasks/{task_id}/approvals", pending_approvals, "Actions of the task waiting for a human",
             response=list[ApprovalRequest], errors=(404,), tag="approvals"),
    Endpoint("POST", "/tasks/{task_id}/approvals", approve, "Approve or refuse a waiting action", 202, models.Approval,
             models.ApprovalAccepted, (404, 409, 422), tag="approvals"),
    Endpoint(
        "GET", "/tasks/{task_id}/events", events, "The event log as Server-Sent Events (live with follow=true)",
        response="sse", errors=(404, 422), tag="streams",
        params=(
            Param("after_seq", "query", {"type": "integer", "minimum": 0}, "only envelopes with a larger seq"),
            Param("follow", "query", {"type": "boolean", "default": True}, "stay open until the task ends"),
            Param("Last-Event-ID", "header", {"type": "integer"}, "resume after this seq (EventSource sends it)"),
        ),
    ),
    Endpoint("GET", "/tasks/{task_id}/deltas", deltas, "Streamed model text (delta events) until the task ends",
             response="sse", errors=(404,), tag="streams"),
)
