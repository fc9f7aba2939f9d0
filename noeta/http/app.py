"""The HTTP API behind ``noeta serve``: JSON endpoints over an :class:`AsyncClient`, and each task's
event log as Server-Sent Events.

``create_app(client)`` builds the Starlette app; ``serve(client, host, port)`` runs it with uvicorn
until the server stops. Every request passes :class:`noeta.security.http_guard.RequestGuard`
(API keys, Host/Origin allow-lists, CORS, body limits; docs/security.md). The API only starts and
reads tasks; workers (``noeta worker``) run them. Endpoints, SSE format and error mapping:
docs/http.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from http import HTTPStatus
from typing import Any

import uvicorn
from pydantic_core import to_jsonable_python
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.wire import envelope_to_dict
from noeta.errors import (
    ConfigurationError,
    NoetaError,
    PayloadTooLargeError,
    QuotaExceededError,
    ServerStartError,
    TaskNotFoundError,
    TaskNotOpenError,
)
from noeta.http.quotas import SpendQuotas, seconds_until_tomorrow
from noeta.protocols.budget import UsageLimits
from noeta.protocols.event_log import EventEnvelope
from noeta.search_attributes import COST_USD as _COST_USD
from noeta.search_attributes import MODEL as _MODEL
from noeta.search_attributes import STATUS as _STATUS
from noeta.search_attributes import TOKENS_IN as _TOKENS_IN
from noeta.search_attributes import TOKENS_OUT as _TOKENS_OUT
from noeta.search_attributes import TURNS as _TURNS
from noeta.security.http_guard import (
    ANONYMOUS_KEY_ID,
    DEFAULT_MAX_BODY,
    KEY_ID_STATE,
    GuardConfig,
    RequestGuard,
    key_id,
)

logger = logging.getLogger(__name__)

#: Seconds of silence after which an SSE stream gets a ``: keep-alive`` comment.
KEEPALIVE_SECONDS = 15.0
#: Largest request body accepted (Temporal refuses payloads over 2 MiB anyway).
MAX_BODY_BYTES = DEFAULT_MAX_BODY
#: Seconds /readyz waits for the Temporal frontend's health check.
READY_TIMEOUT_SECONDS = 5.0
MAX_LIST_LIMIT = 1000


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The Options fields a JSON client may set, each with a check and what it must be.
OPTION_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "system_prompt": (_is_str, "a string"),
    "model": (_is_str, "a string"),
    "provider": (_is_str, "the registry name of a worker's provider (a string)"),
    "allowed_tools": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "a list of tool names registered on the worker",
    ),
    "max_turns": (_is_int, "an integer"),
    "max_retries": (_is_int, "an integer"),
    "temperature": (_is_number, "a number"),
    "max_tokens": (_is_int, "an integer"),
    "model_timeout_seconds": (_is_number, "a number"),
    "tool_timeout_seconds": (_is_number, "a number"),
    "metadata": (lambda v: isinstance(v, dict), "a JSON object"),
    "output_schema": (lambda v: isinstance(v, dict), "a JSON Schema object"),
    "provider_retries": (_is_int, "an integer"),
    "tool_retries": (_is_int, "an integer"),
    "validate_tool_input": (lambda v: isinstance(v, bool), "true or false"),
    "thinking": (lambda v: isinstance(v, dict), "a JSON object"),
    "effort": (_is_str, "a string"),
    "mcp_servers": (lambda v: isinstance(v, dict), "an object of remote MCP server configurations"),
    "scope": (lambda v: isinstance(v, dict), "a JSON object (the task's equip_scope data)"),
    "scope_schema": (lambda v: isinstance(v, dict), "a JSON Schema object the scope must satisfy"),
    "limits": (lambda v: isinstance(v, dict), "a JSON object of usage limits (docs/budgets.md)"),
}
_START_FIELDS = {"goal", "keep_open", "task_id", "task_queue", "options"}
_GOAL_FIELDS = {"goal"}
_APPROVAL_FIELDS = {"call_id", "approved", "reason", "approver"}


#: Task status of a closed workflow that has no TaskResult.
_CLOSED_STATUS = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}

_STATUS_FILTER = re.compile(r"[A-Za-z_]{1,40}")


class HTTPError(Exception):
    """A request-level error (malformed JSON...) with its HTTP status and error name."""

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(message)
        self.status, self.name = status, name


# -- errors -------------------------------------------------------------------------------------


def error_body(err: BaseException) -> dict[str, Any]:
    """``{"error": <ExceptionName>, "message": str, **details}`` (details: ``err.to_details()``).
    Other than Noeta's own errors, messages stay in the server log: they may quote internals."""
    if not isinstance(err, NoetaError):
        return {"error": type(err).__name__, "message": "internal error (see the server log)"}
    body: dict[str, Any] = {"error": type(err).__name__, "message": str(err)}
    if isinstance(err, NoetaError):
        details = to_jsonable_python(err.to_details(), fallback=repr)
        body.update({k: v for k, v in details.items() if k not in body})
    return body


def error_status(err: NoetaError) -> int:
    if isinstance(err, PayloadTooLargeError):
        return 413
    if isinstance(err, ConfigurationError):
        return 422
    if isinstance(err, TaskNotFoundError):
        return 404
    if isinstance(err, ServerStartError):
        return 503
    if isinstance(err, QuotaExceededError):
        return 429
    # TaskNotOpenError, and every error a task or goal failed with (AttemptsExhaustedError,
    # ProviderError, TaskFailedError, TaskCancelledError, ToolNotRegisteredError...).
    return 409


_RPC_STATUS = {
    RPCStatusCode.NOT_FOUND: 404,
    RPCStatusCode.INVALID_ARGUMENT: 422,
    RPCStatusCode.ALREADY_EXISTS: 409,
    RPCStatusCode.FAILED_PRECONDITION: 409,
    RPCStatusCode.UNAVAILABLE: 503,
    RPCStatusCode.DEADLINE_EXCEEDED: 504,
}


async def _on_noeta_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, NoetaError)
    headers = {"Retry-After": str(seconds_until_tomorrow())} if isinstance(err, QuotaExceededError) else None
    return JSONResponse(error_body(err), status_code=error_status(err), headers=headers)


async def _on_http_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, HTTPError)
    return JSONResponse({"error": err.name, "message": str(err)}, status_code=err.status)


async def _on_starlette_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, HTTPException)
    name = HTTPStatus(err.status_code).phrase.replace(" ", "").replace("-", "")
    return JSONResponse(
        {"error": name, "message": err.detail}, status_code=err.status_code, headers=dict(err.headers or {})
    )


async def _on_rpc_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, RPCError)
    return JSONResponse({"error": "RPCError", "message": err.message}, status_code=_RPC_STATUS.get(err.status, 502))


async def _on_already_started(request: Request, err: Exception) -> Response:
    return JSONResponse({"error": type(err).__name__, "message": "a task with this task_id already exists"}, status_code=409)


async def _on_unexpected(request: Request, err: Exception) -> Response:
    # The message of an unexpected error may quote internals: it goes to the log, not the client.
    logger.error("unexpected error answering %s %s", request.method, request.url.path, exc_info=err)
    return JSONResponse({"error": "InternalServerError", "message": "internal error (see the server log)"}, status_code=500)


# -- request parsing ----------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_json_object(request: Request, fields: set[str]) -> dict[str, Any]:
    """The request body as a JSON object with only ``fields`` (400 malformed, 413 too big, 422 shape)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"request body is over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise PayloadTooLargeError(f"request body is over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(bytes(body), parse_constant=_reject_constant)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise HTTPError(400, type(err).__name__, f"malformed JSON body: {err}") from err
    if not isinstance(data, dict):
        raise ConfigurationError("the request body must be a JSON object")
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigurationError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(fields))}")
    return data


def options_from_json(raw: Any) -> Options:
    """``Options`` from the JSON ``options`` object; unknown keys and wrong types are a
    ConfigurationError. ``null`` means the default."""
    if raw is None:
        return Options()
    if not isinstance(raw, dict):
        raise ConfigurationError("options must be a JSON object")
    unknown = sorted(set(raw) - set(OPTION_FIELDS))
    if unknown:
        raise ConfigurationError(f"unknown option(s) {', '.join(unknown)}; allowed: {', '.join(OPTION_FIELDS)}")
    allowed = {k: v for k, v in raw.items() if v is not None}
    for key, value in allowed.items():
        check, expected = OPTION_FIELDS[key]
        if not check(value):
            raise ConfigurationError(f"options.{key} must be {expected}, got {value!r}")
    if "limits" in allowed:
        allowed["limits"] = UsageLimits.from_dict(allowed["limits"])
    return Options(**allowed)


def _optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{key} must be a non-empty string")
    return value


def _goal(data: Mapping[str, Any]) -> str:
    goal = data.get("goal")
    if not isinstance(goal, str):
        raise ConfigurationError("goal must be a non-empty string")
    return goal


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


# -- SSE ----------------------------------------------------------------------------------------


def sse_event(event: str, data: Any, id: int | None = None) -> bytes:
    """One SSE message; ``data`` is JSON on a single line (json.dumps escapes newlines)."""
    lines = [] if id is None else [f"id: {id}"]
    lines += [f"event: {event}", "data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":"))]
    return ("\n".join(lines) + "\n\n").encode()


def sse_envelope(env: EventEnvelope) -> bytes:
    return sse_event(env.type, envelope_to_dict(env), id=env.seq)


_END = object()
_background: set[asyncio.Task[Any]] = set()


async def sse_stream(
    client: AsyncClient, task_id: str, after_seq: int, follow: bool, keepalive_seconds: float
) -> AsyncIterator[bytes]:
    """The task's envelopes after ``after_seq`` as SSE messages, a ``: keep-alive`` comment after
    each ``keepalive_seconds`` of silence, then an ``end`` event. An error after the response
    started becomes a ``stream-error`` event (the status line is already sent)."""
    envelopes = client.events(task_id, after_seq=after_seq, follow=follow).__aiter__()

    async def next_envelope() -> Any:
        try:
            return await envelopes.__anext__()
        except StopAsyncIteration:
            return _END

    pending: asyncio.Task[Any] | None = None
    last_seq = after_seq
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(next_envelope())
            done, _ = await asyncio.wait({pending}, timeout=keepalive_seconds)
            if not done:
                yield b": keep-alive\n\n"
                continue
            finished, pending = pending, None
            try:
                env = finished.result()
            except Exception as err:
                logger.exception("event stream of task %s failed", task_id)
                yield sse_event("stream-error", error_body(err))
                return
            if env is _END:
                break
            last_seq = env.seq
            yield sse_envelope(env)
        yield sse_event("end", {"task_id": task_id, "last_seq": last_seq, "follow": follow})
    finally:
        # The client went away (or the stream ended): stop the long poll and the history reader.
        if pending is not None:
            pending.cancel()
        else:
            closing = asyncio.ensure_future(envelopes.aclose())  # type: ignore[attr-defined]
            _background.add(closing)
            closing.add_done_callback(_background.discard)


# -- the app ------------------------------------------------------------------------------------


def create_app(
    client: AsyncClient,
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
    guard: GuardConfig | None = None,
    quotas: SpendQuotas | None = None,
) -> Starlette:
    """The HTTP API over ``client`` (see docs/http.md). ``keepalive_seconds``: silence after which
    an SSE stream gets a ``: keep-alive`` comment. ``guard``: authentication and request checks
    (default: from the environment, ``GuardConfig.from_env()``). ``quotas``: spend quotas per API
    key and per task (default: ``SpendQuotas.from_env()``, docs/budgets.md)."""
    if keepalive_seconds <= 0:
        raise ConfigurationError("keepalive_seconds must be > 0")
    guard = guard or GuardConfig.from_env()
    quotas = quotas or SpendQuotas.from_env()

    def key_of(request: Request) -> str:
        return getattr(request.state, KEY_ID_STATE, ANONYMOUS_KEY_ID)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        try:
            ok = await asyncio.wait_for(client.temporal.service_client.check_health(), READY_TIMEOUT_SECONDS)
        except Exception:  # unreachable, timed out: not ready (details stay in the log)
            logger.warning("readiness check: Temporal is not reachable", exc_info=True)
            ok = False
        return JSONResponse({"status": "ready" if ok else "unavailable", "temporal": ok}, status_code=200 if ok else 503)

    async def describe(task_id: str) -> WorkflowExecutionDescription:
        try:
            return await client.temporal.get_workflow_handle(task_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise TaskNotFoundError(f"no task {task_id!r}") from err
            raise

    async def ended(task_id: str) -> NoetaError:
        """The error for a NOT_FOUND answer to a signal or cancel: no such task, or it has ended."""
        await describe(task_id)  # raises TaskNotFoundError when the task does not exist
        return TaskNotOpenError(f"task {task_id!r} has ended")

    async def start_task(request: Request) -> Response:
        data = await read_json_object(request, _START_FIELDS)
        goal = _goal(data)
        options = options_from_json(data.get("options"))
        keep_open = data.get("keep_open", False)
        if not isinstance(keep_open, bool):
            raise ConfigurationError("keep_open must be true or false")
        task_id = _optional_str(data, "task_id")
        if task_id is not None and "/" in task_id:
            raise ConfigurationError("task_id must not contain '/' (it is part of the task's URLs)")
        task_queue = _optional_str(data, "task_queue")
        key = key_of(request)
        options = quotas.cap(options, await quotas.admit(client, key))  # 429 once the key's quota is spent
        task_id = await client.start(
            goal, options, task_id=task_id, keep_open=keep_open, task_queue=task_queue, api_key_id=key
        )
        return JSONResponse({"task_id": task_id}, status_code=201)

    async def list_tasks(request: Request) -> Response:
        status = request.query_params.get("status") or None
        if status is not None and not _STATUS_FILTER.fullmatch(status):
            raise ConfigurationError(f"status must be a status name such as completed, got {status!r}")
        limit = int_param(request.query_params.get("limit"), "limit", 50, minimum=1, maximum=MAX_LIST_LIMIT)
        return JSONResponse(to_jsonable_python(await client.list_tasks(status, limit)))

    async def get_task(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        desc = await describe(task_id)
        attrs = desc.typed_search_attributes
        running = desc.status == WorkflowExecutionStatus.RUNNING
        body: dict[str, Any] = {
            "task_id": task_id,
            "status": attrs.get(_STATUS) or "running",
            "running": running,
            "model": attrs.get(_MODEL),
            "turns": attrs.get(_TURNS) or 0,
            "tokens_in": attrs.get(_TOKENS_IN) or 0,
            "tokens_out": attrs.get(_TOKENS_OUT) or 0,
            "cost_usd": attrs.get(_COST_USD) or 0.0,
            "started": desc.start_time,
            "closed": desc.close_time,
            "result": None,
            "error": None,
        }
        if not running:
            try:
                result = await client.result(task_id)
            except NoetaError as err:
                body["status"] = _CLOSED_STATUS.get(desc.status, "failed") if desc.status else "failed"
                body["error"] = error_body(err)
            else:
                body["status"] = result.status
                body["result"] = result
                body["cost_usd"] = result.usage.cost_usd
        return JSONResponse(to_jsonable_python(body))

    async def send_goal(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        goal = _goal(await read_json_object(request, _GOAL_FIELDS))
        await quotas.admit(client, key_of(request))
        try:
            result = await client.send_goal(task_id, goal)
        except TaskNotOpenError:
            await describe(task_id)  # no such task: 404 rather than 409
            raise
        return JSONResponse(to_jsonable_python(result))

    async def cancel_task(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        # Temporal accepts a cancel request for a closed workflow and ignores it: check first.
        if (await describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            raise TaskNotOpenError(f"task {task_id!r} has ended")
        try:
            await client.cancel(task_id)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await ended(task_id) from err
            raise
        return JSONResponse({"task_id": task_id}, status_code=202)

    async def close_task(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            await client.close_task(task_id)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await ended(task_id) from err
            raise
        return JSONResponse({"task_id": task_id}, status_code=202)

    async def pending_approvals(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if (await describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            return JSONResponse([])  # an ended task waits for nothing
        return JSONResponse(to_jsonable_python(await client.pending_approvals(task_id)))

    async def approve(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        data = await read_json_object(request, _APPROVAL_FIELDS)
        call_id = _optional_str(data, "call_id")
        if call_id is None:
            raise ConfigurationError("call_id is required")
        approved = data.get("approved", True)
        if not isinstance(approved, bool):
            raise ConfigurationError("approved must be true or false")
        await describe(task_id)  # unknown task: 404
        await client.approve(
            task_id, call_id, approved, _optional_str(data, "reason"), _optional_str(data, "approver")
        )
        return JSONResponse({"task_id": task_id, "call_id": call_id, "approved": approved}, status_code=202)

    async def messages(request: Request) -> Response:
        items = await client.messages(request.path_params["task_id"])
        return JSONResponse([{"type": type(item).__name__, **to_jsonable_python(item)} for item in items])

    async def events(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        after_seq = int_param(request.query_params.get("after_seq"), "after_seq", 0)
        last_event_id = request.headers.get("last-event-id", "").strip()
        if last_event_id:
            after_seq = max(after_seq, int_param(last_event_id, "Last-Event-ID", 0))
        follow = bool_param(request.query_params.get("follow"), "follow", True)
        await describe(task_id)  # an unknown task is a 404, not an empty stream
        return StreamingResponse(
            sse_stream(client, task_id, after_seq, follow, keepalive_seconds),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/tasks", start_task, methods=["POST"]),
        Route("/tasks", list_tasks, methods=["GET"]),
        Route("/tasks/{task_id}", get_task, methods=["GET"]),
        Route("/tasks/{task_id}/goals", send_goal, methods=["POST"]),
        Route("/tasks/{task_id}/cancel", cancel_task, methods=["POST"]),
        Route("/tasks/{task_id}/close", close_task, methods=["POST"]),
        Route("/tasks/{task_id}/messages", messages, methods=["GET"]),
        Route("/tasks/{task_id}/approvals", pending_approvals, methods=["GET"]),
        Route("/tasks/{task_id}/approvals", approve, methods=["POST"]),
        Route("/tasks/{task_id}/events", events, methods=["GET"]),
    ]
    handlers: dict[Any, Any] = {
        HTTPException: _on_starlette_error,
        HTTPError: _on_http_error,
        NoetaError: _on_noeta_error,
        RPCError: _on_rpc_error,
        WorkflowAlreadyStartedError: _on_already_started,
        Exception: _on_unexpected,
    }
    return Starlette(routes=routes, exception_handlers=handlers, middleware=[Middleware(RequestGuard, config=guard)])


async def serve(
    client: AsyncClient,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
    log_level: str = "info",
    guard: GuardConfig | None = None,
    quotas: SpendQuotas | None = None,
) -> None:
    """Run the HTTP API with uvicorn; returns when the server stops (Ctrl-C / SIGTERM, or when the
    calling task is cancelled: the server then shuts down before the cancellation propagates).
    Without API keys it only listens on loopback (``NOETA_ALLOW_UNAUTHENTICATED=1`` overrides,
    for a deployment behind an authenticating proxy)."""
    guard = guard or GuardConfig.from_env(bind_host=host)
    guard.check_bind(host, allow_unauthenticated=os.environ.get("NOETA_ALLOW_UNAUTHENTICATED") == "1")
    if not guard.api_keys:
        logger.warning("noeta serve has no API keys (NOETA_API_KEYS): any local process can use it")
    quotas = quotas or SpendQuotas.from_env()
    await quotas.check_cluster(client)
    if quotas.active:
        # Key ids (hash prefixes), so an operator can give a key its own quota (NOETA_KEY_QUOTAS).
        logger.info("spend quotas on; API key ids: %s", ", ".join(key_id(k) for k in guard.api_keys) or "anonymous")
    config = uvicorn.Config(
        create_app(client, keepalive_seconds=keepalive_seconds, guard=guard, quotas=quotas),
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=5,  # open SSE streams would otherwise hold shutdown forever
    )
    server = uvicorn.Server(config)
    running = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        server.should_exit = True
        await running
        raise
