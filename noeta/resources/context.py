"""Where user code finds its resources and scope: ``expect_resource``, ``expect_scope``, ``run_with``.

The worker's activities (tool calls, guards, validators) activate the task's :class:`ActiveRun` in a
context variable around the user code they call; synchronous user code runs in threads that copy
the activity's context, so it sees the same run. Outside an activity, ``run_with(resources=...)``
provides resources to the code it wraps and to the tasks that ``query()`` runs inside it.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel

from noeta.config.context_values import set_within
from noeta.errors import ConfigurationError, ResourceNotFoundError, ScopeError
from noeta.protocols.resources import MAX_RECORDED_RESOURCE_CALLS, ResourceCall
from noeta.protocols.scope import validate_scope

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class CallRecorder:
    """Collects the calls of instrumented resources during one activity (bounded; thread-safe,
    since a synchronous tool runs in a thread of its own)."""

    def __init__(self, limit: int = MAX_RECORDED_RESOURCE_CALLS) -> None:
        """``limit``: how many calls are kept; later ones are only counted (``dropped``)."""
        self.limit = limit
        self.calls: list[ResourceCall] = []
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, call: ResourceCall) -> None:
        """Keep ``call``, or count it as dropped once ``limit`` calls are kept."""
        with self._lock:
            if len(self.calls) < self.limit:
                self.calls.append(call)
            else:
                self.dropped += 1


@dataclass(frozen=True)
class ActiveRun:
    """The task an activity's user code runs for."""

    task_id: str
    resources: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Nearest first: the task's own, its parents' exposed ones, the run's and the worker's."""
    scope: Mapping[str, Any] = field(default_factory=dict)
    """The merged scope (nearest level wins)."""
    recorder: CallRecorder | None = field(default=None, repr=False)


_active: ContextVar[ActiveRun | None] = ContextVar("noeta_active_run", default=None)
_ambient: ContextVar[Mapping[str, Any]] = ContextVar("noeta_run_with_resources", default=_EMPTY)


def activated(run: ActiveRun) -> AbstractContextManager[None]:
    """Make ``run`` the current one for the code inside (and threads that copy this context)."""
    return set_within(_active, run)


def active_run() -> ActiveRun | None:
    return _active.get()


def ambient_resources() -> Mapping[str, Any]:
    """Resources given by the enclosing ``run_with`` blocks (innermost wins)."""
    return _ambient.get()


def recorder() -> CallRecorder | None:
    run = _active.get()
    return run.recorder if run is not None else None


_MISSING: Any = object()


@overload
def expect_resource(key: str) -> Any: ...
@overload
def expect_resource(key: str, *, optional: Literal[True]) -> Any | None: ...
def expect_resource(key: str, *, optional: bool = False) -> Any:
    """The resource ``key``, nearest first (the task's own, the nearest parent that exposes it, the
    run's, the worker's). Raises :class:`ResourceNotFoundError` when there is none, or returns None
    with ``optional=True``. Synchronous: resources are created before user code runs."""
    run = _active.get()
    where = run.resources if run is not None else _ambient.get()
    try:
        value = where.get(key, _MISSING)
    except ResourceNotFoundError:
        if optional:
            return None
        raise
    if value is not _MISSING:
        return value
    if optional:
        return None
    known = ", ".join(sorted(where)) or "none"
    place = f"task {run.task_id!r}" if run is not None else "this run_with block"
    raise ResourceNotFoundError(
        f"resource {key!r} is not available to {place} (it has: {known}); provide it with "
        "equip_resource(...) in Options(resources=[...]), a parent that exposes it, "
        "run_with(resources=...) / query(resources=...), or the worker's Registry(resources=...)",
        key,
    )


@overload
def expect_scope(schema: type[M]) -> M: ...
@overload
def expect_scope(schema: None = None) -> Mapping[str, Any]: ...
def expect_scope(schema: type[BaseModel] | None = None) -> Any:
    """The task's scope (its own and its parents', nearest level winning) validated by ``schema``:
    defaults applied, deep-frozen. Raises :class:`ScopeError` naming a missing or invalid key."""
    run = _active.get()
    if run is None:
        raise ScopeError(
            "expect_scope() is called outside a task: it works in tools, guards and validators "
            "(policies use ctx.expect_scope)"
        )
    return validate_scope(schema, run.scope)


class _RunWith:
    def __init__(self, resources: Mapping[str, Any]) -> None:
        self.resources = resources
        self._tokens: list[Any] = []

    def __enter__(self) -> Mapping[str, Any]:
        merged = {**_ambient.get(), **self.resources}
        self._tokens.append(_ambient.set(MappingProxyType(merged)))
        return merged

    def __exit__(self, *exc: object) -> None:
        _ambient.reset(self._tokens.pop())

    async def __aenter__(self) -> Mapping[str, Any]:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


@overload
def run_with(*, resources: Mapping[str, Any]) -> _RunWith: ...
@overload
def run_with(fn: Callable[[], T], /, *, resources: Mapping[str, Any]) -> T: ...
def run_with(fn: Callable[[], Any] | None = None, /, *, resources: Mapping[str, Any]) -> Any:
    """Provide ``resources`` (live objects by key) to the code inside (seed: ``runWith``).

    ``with run_with(resources={"redis": r}): query(...)`` — or ``run_with(fn, resources=...)``,
    which calls ``fn()`` inside and returns its result (an awaitable for an async ``fn``). Tasks
    that ``query()`` runs inside see them, as does ``expect_resource`` called directly inside.
    """
    if not isinstance(resources, Mapping) or not all(isinstance(k, str) and k for k in resources):
        raise ConfigurationError("run_with(resources=...) takes a mapping of non-empty keys to objects")
    block = _RunWith(dict(resources))
    if fn is None:
        return block
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def inside() -> Any:
            with block:
                return await fn()

        return inside()
    with block:
        return fn()


__all__ = ["ActiveRun", "CallRecorder", "activated", "ambient_resources", "expect_resource", "expect_scope", "run_with"]
