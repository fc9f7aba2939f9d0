"""The OpenAPI 3.1 description of the HTTP API, generated from the endpoint table
(:data:`noeta.http.routes.ENDPOINTS`) and the pydantic models: served at ``/openapi.json`` and
rendered by the docs page (``/docs``)."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from noeta.http.models import ErrorBody
from noeta.http.routes import ENDPOINTS, Endpoint

_REF = "#/components/schemas/{model}"
_STATUS_TEXT = {
    200: "OK", 201: "Created", 202: "Accepted", 400: "Malformed JSON", 401: "No or a wrong API key",
    404: "No such task", 409: "The task cannot take this now (ended, not keep_open, not pending) or failed",
    413: "Body or goal too large", 422: "Invalid fields or options",
    429: "The API key has spent its daily quota (Retry-After: seconds to midnight UTC)",
    503: "Temporal unreachable",
}


def _schema(tp: Any, mode: str, defs: dict[str, Any]) -> dict[str, Any]:
    schema = TypeAdapter(tp).json_schema(ref_template=_REF, mode=mode, schema_generator=GenerateJsonSchema)  # type: ignore[arg-type]
    defs.update(schema.pop("$defs", {}))
    if isinstance(tp, type) and "title" in schema:  # a named model: a component of its own
        defs[tp.__name__] = schema
        return {"$ref": _REF.format(model=tp.__name__)}
    return schema


def _operation(endpoint: Endpoint, defs: dict[str, Any], version: str) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": endpoint.summary,
        "operationId": endpoint.handler.__name__,
        "tags": [endpoint.tag],
    }
    params = [
        {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}}
    ] if "{task_id}" in endpoint.path else []
    for p in endpoint.params:
        schema = {"type": "array", "items": p.schema} if p.repeated else p.schema
        params.append({"name": p.name, "in": p.where, "required": False, "schema": schema, "description": p.description})
    if params:
        op["parameters"] = params
    if endpoint.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema(endpoint.body, "validation", defs)}},
        }
    if endpoint.response == "sse":
        content: dict[str, Any] = {"text/event-stream": {"schema": {"type": "string"}}}
    elif endpoint.response is not None:
        content = {"application/json": {"schema": _schema(endpoint.response, "serialization", defs)}}
    else:
        content = {}
    responses: dict[str, Any] = {str(endpoint.status): {"description": _STATUS_TEXT.get(endpoint.status, ""), "content": content}}
    error = {"application/json": {"schema": {"$ref": _REF.format(model="ErrorBody")}}}
    errors = endpoint.errors if endpoint.tag == "health" else (*endpoint.errors, 401)
    for status in sorted(set(errors)):
        responses[str(status)] = {"description": _STATUS_TEXT.get(status, ""), "content": error}
    op["responses"] = responses
    if endpoint.tag != "health":
        op["security"] = [{"bearer": []}, {"apiKey": []}]
    return op


@functools.cache
def openapi(version: str = "") -> dict[str, Any]:
    from noeta import __version__

    defs: dict[str, Any] = {}
    _schema(ErrorBody, "serialization", defs)
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint, defs, version)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Noeta HTTP API",
            "version": version or __version__,
            "description": "Start and follow LLM agent tasks that run as durable Temporal workflows. "
            "Every path but /healthz and /readyz needs `Authorization: Bearer <key>` (or `X-API-Key`) when "
            "the server has API keys (NOETA_API_KEYS).",
        },
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
    }
