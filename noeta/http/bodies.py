"""How the API reads a request body before FastAPI validates it against the endpoint's model: at
most :data:`MAX_BODY_BYTES` (counted as it arrives, whatever ``Content-Length`` said), and strict
JSON (``NaN`` and ``Infinity``, which Python's parser accepts, are refused). Endpoints get this
through their router's ``route_class``."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from noeta.http.errors import HTTPError
from noeta.security.http_guard import DEFAULT_MAX_BODY

#: Largest request body accepted (Temporal refuses payloads over 2 MiB anyway).
MAX_BODY_BYTES = DEFAULT_MAX_BODY


#: Deepest nesting of arrays and objects a request body may have (no endpoint needs more).
MAX_JSON_DEPTH = 64
#: Integers beyond a signed 64-bit range are refused: Temporal and the workers cannot carry them.
MAX_JSON_INT = 2**63 - 1


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def _checked_json(value: Any) -> Any:
    """``value`` once every string is valid Unicode text (no lone surrogate, which JSON's
    ``\\ud800`` escapes can make and no UTF-8 encoder takes), every integer within 64 bits and
    nothing nested deeper than MAX_JSON_DEPTH; ValueError naming the first problem."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError as err:
                raise ValueError(f"a string holds a lone surrogate ({item[err.start]!r}), not text") from None
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not -MAX_JSON_INT - 1 <= item <= MAX_JSON_INT:
                raise ValueError(f"integer {item} is out of range (64 bits)")
        elif isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)
    return value


class BoundedRequest(Request):
    """A request whose body is read with a size limit and parsed as strict JSON; errors are
    ``HTTPError`` (413 ``PayloadTooLargeError``, 400 ``JSONDecodeError``...), which FastAPI lets
    through to the exception handlers."""

    async def body(self) -> bytes:
        """The request body, read once; HTTPError 413 past MAX_BODY_BYTES."""
        if not hasattr(self, "_body"):
            received = bytearray()
            async for chunk in self.stream():
                received += chunk
                if len(received) > MAX_BODY_BYTES:
                    raise HTTPError(413, "PayloadTooLargeError", f"request body is over {MAX_BODY_BYTES} bytes")
            self._body = bytes(received)
        return self._body

    async def json(self) -> Any:
        """The body parsed as JSON, once; HTTPError 400 for malformed JSON (NaN and Infinity
        included) and for JSON no task can carry: a lone surrogate in a string, a number out of
        range, nesting deeper than MAX_JSON_DEPTH."""
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                parsed = json.loads(body, parse_constant=_reject_constant, parse_float=_finite)
            except RecursionError:  # deeper than the parser itself goes
                raise HTTPError(400, "JSONDecodeError", f"malformed JSON body: nested deeper than {MAX_JSON_DEPTH} levels") from None
            except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity, 1e999
                name = type(err).__name__ if isinstance(err, UnicodeDecodeError) else "JSONDecodeError"
                raise HTTPError(400, name, f"malformed JSON body: {err}") from err
            try:
                self._json = _checked_json(parsed)
            except ValueError as err:
                raise HTTPError(400, "JSONDecodeError", f"malformed JSON body: {err}") from err
        return self._json


class BoundedRoute(APIRoute):
    """An endpoint that reads its body as a :class:`BoundedRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route's handler, given the request as a BoundedRequest."""
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            return await handler(BoundedRequest(request.scope, request.receive))

        return bounded
