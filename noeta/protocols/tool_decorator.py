"""``@tool``: turn ``fn(arguments, ctx) -> ToolResult`` into a :class:`DecoratedTool`.

The decorator sits beside the :class:`~noeta.protocols.tool.Tool` protocol it implements, below
every layer that declares tools: the built-in tools use it, and :mod:`noeta.sdk` re-exports it
(``from noeta.sdk import tool``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypedDict, Unpack, get_args, overload

import jsonschema
from pydantic import BaseModel
from typing_extensions import TypeVar

from noeta.errors import ToolDefinitionError
from noeta.protocols.local_tools import check_local_tool
from noeta.protocols.tool import RiskLevel, ToolContext, ToolResult, tool_fingerprint
from noeta.protocols.tool_schema import schema_of

ToolReturn = ToolResult | Awaitable[ToolResult]
"""What a tool function returns: a ToolResult, or an awaitable of one (``async def``)."""

R = TypeVar("R", bound=ToolReturn)
ResultT = TypeVar("ResultT", bound=ToolReturn, covariant=True, default=ToolReturn)
"""The wrapped function's return type: ``DecoratedTool[ToolResult]`` for a ``def``, a coroutine for
an ``async def``; a bare ``DecoratedTool`` is any tool."""

ToolFunction = Callable[[dict[str, Any], ToolContext], R]

_MISSING: Any = object()

InputSchema = dict[str, Any] | type[BaseModel]
"""A tool's input schema as ``@tool`` takes it: a JSON Schema dict, or a pydantic model class."""


@dataclass(frozen=True, slots=True)
class DecoratedTool(Generic[ResultT]):
    """A tool made by :func:`tool`. Calling it calls the wrapped function."""

    fn: Callable[[dict[str, Any], ToolContext], ResultT] = field(repr=False)
    name: str
    version: str
    input_schema: dict[str, Any]
    description: str = ""
    """What the tool does: the model's only source of truth about it."""
    risk_level: RiskLevel = "low"
    timeout_seconds: float | None = None
    """Start-to-close timeout of one attempt (default: ``Options.tool_timeout_seconds``)."""
    heartbeat_seconds: float | None = None
    """A worker that stops heartbeating for this long is presumed dead and the call is retried."""
    max_retries: int | None = None
    """Retries of a failed attempt (default: ``Options.tool_retries``, else ``Options.max_retries``)."""
    validate_input: bool = False
    """Check the model's arguments against ``input_schema`` before calling the tool; a mismatch
    goes back to the model as a failed result. Off by default: the schema is metadata for the
    model, not a runtime validator (``Options.validate_tool_input`` turns it on for a whole task)."""
    resources: tuple[str, ...] = ()
    """Keys of the resources the tool uses: a task that cannot provide one fails before its first
    model call (ResourceNotFoundError), instead of when the model first calls the tool."""
    local: bool = False
    """Run as a Temporal local activity on the workflow's worker: one history event instead of an
    activity's round trip (docs/tools.md says when not to). Its ``timeout_seconds`` defaults to
    LOCAL_TOOL_TIMEOUT_SECONDS and may not exceed LOCAL_TOOL_MAX_TIMEOUT_SECONDS."""

    @property
    def fingerprint(self) -> str:
        """The identity recorded for the tool in a task (name, version, input schema)."""
        return tool_fingerprint(self.name, self.version, self.input_schema)

    def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ResultT:
        """Call the wrapped function."""
        return self.fn(arguments, ctx)

    def __call__(self, arguments: dict[str, Any], ctx: ToolContext) -> ResultT:
        """Call the wrapped function, as ``invoke`` does."""
        return self.fn(arguments, ctx)


class ToolDecorator(Protocol):
    """What ``tool(name=..., version=..., input_schema=...)`` returns: it wraps one function."""

    def __call__(self, fn: ToolFunction[R], /) -> DecoratedTool[R]:
        """Wrap ``fn`` as a DecoratedTool."""


class _ToolKeywords(TypedDict, total=False):
    # tool()'s optional keywords, as its overloads declare them (the defaults are the implementation's).
    description: str | None
    risk_level: RiskLevel
    timeout_seconds: float | None
    heartbeat_seconds: float | None
    max_retries: int | None
    validate_input: bool
    resources: Sequence[str]
    local: bool


# The two overloads are the two ways to use it: tool(fn, name=...) and @tool(name=...). The
# keywords are required here as they are at run time (omitting one raises TypeError).
@overload
def tool(
    fn: ToolFunction[R], *, name: str, version: str, input_schema: InputSchema, **keywords: Unpack[_ToolKeywords]
) -> DecoratedTool[R]: ...


@overload
def tool(
    fn: None = None, *, name: str, version: str, input_schema: InputSchema, **keywords: Unpack[_ToolKeywords]
) -> ToolDecorator: ...


def tool(
    fn: ToolFunction[Any] | None = None,
    *,
    name: str = _MISSING,
    version: str = _MISSING,
    input_schema: InputSchema = _MISSING,
    description: str | None = None,
    risk_level: RiskLevel = "low",
    timeout_seconds: float | None = None,
    heartbeat_seconds: float | None = None,
    max_retries: int | None = None,
    validate_input: bool = False,
    resources: Sequence[str] = (),
    local: bool = False,
) -> DecoratedTool[Any] | ToolDecorator:
    """Declare a tool. ``name``, ``version`` and ``input_schema`` are required keywords: the version
    feeds the tool's identity fingerprint, so omitting it raises TypeError.

    ``input_schema`` is a JSON Schema dict or a pydantic model class (its ``model_json_schema()``
    is the schema); :func:`~noeta.protocols.tool_schema.tool_description` derives ``name``,
    ``description`` and ``input_schema`` from a typed function. Either way the schema is metadata
    for the model, not a validator (``validate_input`` turns checking on).

    ``local=True`` runs the tool as a Temporal local activity (fast tools that cannot block; see
    :mod:`noeta.protocols.local_tools`): ToolDefinitionError for a heartbeat or a timeout above
    LOCAL_TOOL_MAX_TIMEOUT_SECONDS.

    Use as ``@tool(name=..., version=..., input_schema=...)`` or ``tool(fn, name=..., ...)``.
    """
    missing = [
        k for k, v in (("name", name), ("version", version), ("input_schema", input_schema)) if v is _MISSING
    ]
    if missing:
        raise TypeError(f"tool() missing required keyword argument(s): {', '.join(missing)}")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError("tool name must be a non-empty string")
    if not isinstance(version, str) or not version:
        raise ToolDefinitionError(f"tool {name!r}: version must be a non-empty string")
    if risk_level not in get_args(RiskLevel):
        raise ToolDefinitionError(f"tool {name!r}: risk_level must be one of {get_args(RiskLevel)}")
    input_schema = schema_of(input_schema, name)
    try:
        jsonschema.validators.validator_for(input_schema).check_schema(input_schema)
    except jsonschema.exceptions.SchemaError as err:
        raise ToolDefinitionError(f"tool {name!r}: input_schema is not valid JSON Schema: {err.message}") from err

    if isinstance(resources, str) or not all(isinstance(k, str) and k for k in resources):
        raise ToolDefinitionError(f"tool {name!r}: resources must be a list of resource keys")
    if not isinstance(local, bool):
        raise ToolDefinitionError(f"tool {name!r}: local must be True or False")
    if local:
        check_local_tool(name, timeout_seconds, heartbeat_seconds)

    def wrap(f: ToolFunction[R]) -> DecoratedTool[R]:
        if not callable(f):
            raise ToolDefinitionError(f"tool {name!r}: {f!r} is not callable")
        return DecoratedTool(
            fn=f,
            name=name,
            version=version,
            input_schema=input_schema,
            description=description if description is not None else (f.__doc__ or "").strip(),
            risk_level=risk_level,
            timeout_seconds=timeout_seconds,
            heartbeat_seconds=heartbeat_seconds,
            max_retries=max_retries,
            validate_input=validate_input,
            resources=tuple(resources),
            local=local,
        )

    return wrap(fn) if fn is not None else wrap


__all__ = ["DecoratedTool", "InputSchema", "ToolDecorator", "ToolFunction", "ToolReturn", "tool"]
