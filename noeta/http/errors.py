"""How the HTTP API answers errors: every error is JSON ``{"error": <name>, "message": ..., ...}``
with one status per kind (docs/http.md). Noeta's typed errors (task not found, not open, bad
options...) come from the client layer already translated, FastAPI reports what fails validation;
this module registers one exception handler per kind and maps each to its status.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic_core import to_jsonable_python
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.errors import (
    ConfigurationError,
    NoetaError,
    PayloadTooLargeError,
    QuotaExceededError,
    ScheduleNotFoundError,
    ServerStartError,
    TaskNotFoundError,
    TurnNotFoundError,
    TemporalUnavailableError,
)

logger = logging.getLogger(__name__)


class HTTPError(HTTPException):
    """A request-level error (malformed JSON, body too large...) with its HTTP status and error
    name. An ``HTTPException`` so that FastAPI lets it through while it reads the body."""

    def __init__(self, status: int, name: str, message: str) -> None:
        """``status``: the HTTP status; ``name``: the error name in the body; ``message``: what went
        wrong."""
        super().__init__(status, message)
        self.name = name


def error_body(err: BaseException) -> dict[str, Any]:
    """``{"error": <ExceptionName>, "message": str, **details}`` (details: ``err.to_details()``).
    Other than Noeta's own errors, messages stay in the server log: they may quote internals."""
    if not isinstance(err, NoetaError):
        return {"error": type(err).__name__, "message": "internal error (see the server log)"}
    body: dict[str, Any] = {"error": type(err).__name__, "message": str(err)}
    details = to_jsonable_python(err.to_details(), fallback=repr)
    body.update({k: v for k, v in details.items() if k not in body})
    return body


def error_status(err: NoetaError) -> int:
    """The HTTP status of a Noeta error (docs/http.md, "Errors")."""
    if isinstance(err, PayloadTooLargeError):
        return 413
    if isinstance(err, (ConfigurationError, TurnNotFoundError)):
        return 422
    if isinstance(err, (TaskNotFoundError, ScheduleNotFoundError)):
        return 404
    if isinstance(err, (ServerStartError, TemporalUnavailableError)):
        return 503
    if isinstance(err, QuotaExceededError):
        return 429
    # TaskNotOpenError, ApprovalNotPendingError, ScheduleAlreadyExistsError, and every error a task or goal failed with
    # (AttemptsExhaustedError, ProviderError, TaskFailedError, TaskCancelledError...).
    return 409


#: Where FastAPI says a parameter came from: the first item of an error's ``loc``.
_SOURCES = ("body", "query", "path", "header", "cookie")
#: What pydantic says when the body is not an object at all.
_NOT_AN_OBJECT = ("model_attributes_type", "model_type", "dict_type")


def validation_message(problems: Iterable[Mapping[str, Any]]) -> str:
    """pydantic's findings in one line: ``options.max_turns: Input should be a valid integer``."""
    lines = []
    for item in problems:
        loc = tuple(item["loc"])
        where = ".".join(str(p) for p in (loc[1:] if loc[:1] and loc[0] in _SOURCES else loc))
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown field {where}")
        elif item["type"] == "missing":
            lines.append(f"{where} is required" if where else "a JSON request body is required")
        elif not where and item["type"] in _NOT_AN_OBJECT:
            lines.append("the request body must be a JSON object")
        else:
            lines.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(dict.fromkeys(lines))


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
    from noeta.http.quotas import seconds_until_tomorrow

    headers = {"Retry-After": str(seconds_until_tomorrow())} if isinstance(err, QuotaExceededError) else None
    return JSONResponse(error_body(err), status_code=error_status(err), headers=headers)


async def _on_invalid_request(request: Request, err: Exception) -> Response:
    # A field or parameter of the wrong type is a bad option, as the Python client would say.
    assert isinstance(err, RequestValidationError)
    body = {"error": ConfigurationError.__name__, "message": validation_message(err.errors())}
    return JSONResponse(body, status_code=422)


async def _on_http_exception(request: Request, err: Exception) -> Response:
    # Ours carry their name; the framework's (no such route, wrong method) are named by status.
    assert isinstance(err, HTTPException)
    name = getattr(err, "name", None) or HTTPStatus(err.status_code).phrase.replace(" ", "").replace("-", "")
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


#: The app's exception handlers (Starlette picks the most specific class of each error); they
#: replace FastAPI's own for ``HTTPException`` and ``RequestValidationError``.
EXCEPTION_HANDLERS: dict[Any, Any] = {
    HTTPException: _on_http_exception,
    RequestValidationError: _on_invalid_request,
    NoetaError: _on_noeta_error,
    RPCError: _on_rpc_error,
    WorkflowAlreadyStartedError: _on_already_started,
    Exception: _on_unexpected,
}
