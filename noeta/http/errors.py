"""How the HTTP API answers errors: every error is JSON ``{"error": <name>, "message": ..., ...}``
with one status per kind (docs/http.md). Noeta's typed errors (task not found, not open, bad
options...) come from the client layer already translated; this module only maps them to HTTP.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
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
    ServerStartError,
    TaskNotFoundError,
    TemporalUnavailableError,
)

logger = logging.getLogger(__name__)


class HTTPError(Exception):
    """A request-level error (malformed JSON...) with its HTTP status and error name."""

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(message)
        self.status, self.name = status, name


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
    if isinstance(err, PayloadTooLargeError):
        return 413
    if isinstance(err, ConfigurationError):
        return 422
    if isinstance(err, TaskNotFoundError):
        return 404
    if isinstance(err, (ServerStartError, TemporalUnavailableError)):
        return 503
    if isinstance(err, QuotaExceededError):
        return 429
    # TaskNotOpenError, ApprovalNotPendingError, and every error a task or goal failed with
    # (AttemptsExhaustedError, ProviderError, TaskFailedError, TaskCancelledError...).
    return 409


def validation_message(err: ValidationError, prefix: str = "") -> str:
    """pydantic's findings in one line: ``options.max_turns: Input should be a valid integer``."""
    problems = []
    for item in err.errors():
        where = ".".join(str(p) for p in (prefix, *item["loc"]) if p != "")
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown field {where}")
        elif item["type"] == "missing":
            problems.append(f"{where} is required")
        else:
            problems.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(dict.fromkeys(problems))


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


#: Starlette's exception handlers, most specific first.
EXCEPTION_HANDLERS: dict[Any, Any] = {
    HTTPException: _on_starlette_error,
    HTTPError: _on_http_error,
    NoetaError: _on_noeta_error,
    RPCError: _on_rpc_error,
    WorkflowAlreadyStartedError: _on_already_started,
    Exception: _on_unexpected,
}
