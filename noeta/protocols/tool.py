"""The tool interface (seed: ``Tool`` / ``ToolContext`` / ``ToolResult``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from noeta.protocols.messages import ContentRef, ImageBlock

RiskLevel = Literal["low", "medium", "high"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns.

    A large ``output`` is moved to the content store by the worker: ``output_ref`` then points at
    the whole body and ``output`` keeps a short preview.
    """

    success: bool
    output: str | None = None
    summary: str | None = None
    """One line for humans (Temporal UI, logs)."""
    artifacts: list[ContentRef] = field(default_factory=list)
    images: list[ImageBlock] = field(default_factory=list)
    side_effects: list[str] = field(default_factory=list)
    """Human-readable descriptions of what the tool changed outside the task."""
    output_ref: ContentRef | None = None
    file_changes: list[str] = field(default_factory=list)
    """Paths (relative to the workspace) the tool created, modified or deleted."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool invocation knows about where it runs."""

    task_id: str
    call_id: str
    tool_name: str
    attempt: int
    """Activity attempt, starting at 1; >1 means an earlier attempt failed or its worker died."""
    workspace_dir: str | None = None
    idempotency_key: str = ""
    """``{task_id}/{call_id}``: stable across retries, so side effects can be de-duplicated."""
    heartbeat: Callable[..., None] | None = field(default=None, compare=False, repr=False)
    """Report progress on a long call; also how cancellation reaches the tool."""
    resources: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The resources this call may use, nearest first (also through ``expect_resource``)."""
    scope: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The task's merged scope, read-only (validate it with ``expect_scope(Model)``)."""

    def __post_init__(self) -> None:
        """An empty ``idempotency_key`` becomes ``{task_id}/{call_id}``."""
        if not self.idempotency_key:
            object.__setattr__(self, "idempotency_key", f"{self.task_id}/{self.call_id}")


@runtime_checkable
class Tool(Protocol):
    """Tool metadata plus ``invoke(arguments, ctx) -> ToolResult`` (sync or async).

    The metadata are read-only properties so that a frozen object (an ``@tool``) or a class with
    plain attributes both satisfy it.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""

    @property
    def version(self) -> str:
        """The tool's version: part of its fingerprint, so a change is noticed by running tasks."""

    @property
    def description(self) -> str:
        """What the tool does, for the model."""

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""

    @property
    def risk_level(self) -> RiskLevel:
        """How risky a call is, for guards."""

    def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult | Awaitable[ToolResult]:
        """Run the tool with the model's ``arguments``; a result with ``success=False`` goes back to
        the model, ToolRetryableError asks for a retry."""


def tool_fingerprint(name: str, version: str, input_schema: dict[str, Any]) -> str:
    """Identity of a tool: a change of name, version or schema gives another fingerprint."""
    canonical = json.dumps(
        {"name": name, "version": version, "input_schema": input_schema},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a task sees it: recorded in history when the task starts."""

    name: str
    version: str
    description: str
    input_schema: dict[str, Any]
    risk_level: RiskLevel
    fingerprint: str
    start_to_close_seconds: float | None = None
    heartbeat_seconds: float | None = None
    max_retries: int | None = None
    mcp_server: str | None = None
    """Alias of the remote MCP server that serves this tool (None: a worker's own tool)."""
    mcp_tool: str | None = None
    """The tool's name on that server (``name`` is ``mcp__{alias}__{tool}``)."""
    resources: list[str] = field(default_factory=list)
    """Resources the tool needs: a task without them fails before its first model call."""
    local: bool = False
    """Run as a Temporal local activity (noeta.protocols.local_tools): for fast tools that cannot block."""
