"""Resources: live clients (a database pool, a Redis client, an MCP session) that tools, guards and
validators use (seed: ``runWith({providers})``, ``equipResource`` / ``expectResource``).

Live objects never leave the worker process: history carries only their keys. A resource is
either a plain object (given to the worker's Registry, ``query(resources=...)``, ``run_with``) or a
:class:`ResourceSpec` from :func:`equip_resource`, which the worker creates and destroys:

- ``lifetime="task"``: created for the task that equips it before its first model call, destroyed
  when the task ends (completed, failed or cancelled), visible to its sub-agents when ``expose``;
- ``lifetime="worker"``: created when the worker starts, destroyed when it stops, shared by all.

Lookup is nearest first: the task's own resources, then those its parents expose (nearest parent
first), then the run's and the worker's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.errors import ConfigurationError
from noeta.protocols.statuses import CallOutcome

Lifetime = Literal["task", "worker"]

#: Calls of instrumented resources recorded per activity (the rest are counted, not recorded), so a
#: tool looping over a client cannot grow history without bound.
MAX_RECORDED_RESOURCE_CALLS = 50


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """How the worker makes a resource; see :func:`equip_resource`."""

    key: str
    create: Callable[..., Any] = field(repr=False)
    """Called with the ``deps`` objects, in order; sync or async; returns the live object."""
    destroy: Callable[[Any], Any] | None = field(default=None, repr=False)
    """Called with the object when its lifetime ends; sync or async."""
    deps: tuple[str, ...] = ()
    """Keys of resources ``create`` needs (looked up nearest first, created before it)."""
    expose: bool = False
    """Visible to sub-agents (nearest parent wins); otherwise only to the task that equips it."""
    lifetime: Lifetime = "task"


def equip_resource(
    key: str,
    *,
    create: Callable[..., Any],
    destroy: Callable[[Any], Any] | None = None,
    deps: Sequence[str] = (),
    expose: bool = False,
    lifetime: Lifetime = "task",
) -> ResourceSpec:
    """Declare a resource the worker creates once per task (or per worker) and destroys at its end.

    Mount it with ``Options(resources=[...])`` (the task equips it) or on a worker's Registry.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError("equip_resource: key must be a non-empty string")
    if not callable(create):
        raise ConfigurationError(f"equip_resource({key!r}): create must be callable")
    if destroy is not None and not callable(destroy):
        raise ConfigurationError(f"equip_resource({key!r}): destroy must be callable or None")
    if lifetime not in ("task", "worker"):
        raise ConfigurationError(f"equip_resource({key!r}): lifetime must be 'task' or 'worker', got {lifetime!r}")
    if isinstance(deps, str) or not all(isinstance(d, str) and d for d in deps):
        raise ConfigurationError(f"equip_resource({key!r}): deps must be a list of resource keys")
    if key in deps:
        raise ConfigurationError(f"equip_resource({key!r}): a resource cannot depend on itself")
    return ResourceSpec(key, create, destroy, tuple(deps), bool(expose), lifetime)


@dataclass(frozen=True, slots=True)
class EquippedResource:
    """A task-scoped resource a task owns, as recorded in history (the key, never the object)."""

    key: str
    expose: bool = False


@dataclass(frozen=True, slots=True)
class RunEnv:
    """What user code in an activity (tool, guard, validator) may read besides its arguments:
    the task's merged scope and where its task-scoped resources live. Absent when the task has
    neither, so plain tasks' history does not grow."""

    scope: dict[str, Any] = field(default_factory=dict)
    owned: list[str] = field(default_factory=list)
    """Task-scoped resources of this task."""
    inherited: dict[str, str] = field(default_factory=dict)
    """Resources exposed by parents: key -> the id of the nearest parent task that owns it."""


@dataclass(frozen=True, slots=True)
class ResourceCall:
    """One observed call of an ``instrument``-ed client (recorded with the tool call's result)."""

    resource: str
    """The ``name`` given to ``instrument``."""
    op: str
    duration_ms: float
    outcome: CallOutcome
    error_type: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    """What ``derive`` extracted from the call (JSON values)."""


__all__ = ["MAX_RECORDED_RESOURCE_CALLS", "EquippedResource", "Lifetime", "ResourceCall", "ResourceSpec", "RunEnv", "equip_resource"]
