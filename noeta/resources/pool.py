"""The worker's live resources: plain objects from its Registry, and the instances it creates from
``equip_resource`` specs — per task (owner = the task id) or per worker (owner ``""``).

Creation happens before user code runs (``prepare_task`` for a new task; any activity of the task
on a worker that has not created them yet), so ``expect_resource`` stays synchronous. A task's
instances are destroyed by its final ``release_resources`` step, in reverse order of creation
(dependents before what they depend on); worker-lifetime ones when the worker stops.

With several worker processes, each process creates the instances it needs; the release step
destroys those of the process that runs it, the others are destroyed when their worker stops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from noeta.errors import ResourceError, ResourceNotFoundError
from noeta.protocols.resources import ResourceSpec, RunEnv

logger = logging.getLogger(__name__)

WORKER = ""
"""The owner of worker-lifetime instances."""


async def _call(fn: Any, *args: Any) -> Any:
    """Sync callables run in a thread (with this context), so a slow connect blocks no activity."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    return await result if inspect.isawaitable(result) else result


class ResourcePool:
    """A worker's resource instances, by owner (a task id, or WORKER for worker-lifetime ones) and
    key: created from the registry's specs when first needed, destroyed when their owner is
    released."""
    def __init__(self, entries: Mapping[str, Any]) -> None:
        """``entries``: the registry's resources by key."""
        self.entries = entries
        """The registry's resources: plain objects, or specs (read live: a registry may grow)."""
        self._instances: dict[tuple[str, str], Any] = {}
        self._created: dict[str, list[str]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def spec(self, key: str) -> ResourceSpec | None:
        """The spec registered under ``key``, or None for a plain object (or no entry)."""
        entry = self.entries.get(key)
        return entry if isinstance(entry, ResourceSpec) else None

    def instance(self, owner: str, key: str) -> Any:
        """``owner``'s instance of ``key``, or the _MISSING marker when this process has none."""
        return self._instances.get((owner, key), _MISSING)

    def owners(self) -> list[str]:
        """The tasks that own instances in this process."""
        return [owner for owner in self._created if owner != WORKER]

    # -- creating -----------------------------------------------------------------------------

    async def ensure(self, owner: str, key: str, env: RunEnv | None = None, chain: tuple[str, ...] = ()) -> Any:
        """The instance of spec ``key`` for ``owner``, created (with its deps) if this process has none."""
        found = self._instances.get((owner, key), _MISSING)
        if found is not _MISSING:
            return found
        spec = self.spec(key)
        if spec is None:
            raise ResourceNotFoundError(
                f"resource {key!r} has no equip_resource(...) spec on this worker; register it with "
                "Registry(resources=[equip_resource(...)]) (query() does this for Options.resources)",
                key,
            )
        lock = self._locks.setdefault((owner, key), asyncio.Lock())
        async with lock:
            found = self._instances.get((owner, key), _MISSING)
            if found is not _MISSING:
                return found
            deps = []
            for dep in spec.deps:
                if dep in chain or dep == key:
                    raise ResourceError(f"resources depend on each other in a cycle: {' -> '.join((*chain, key, dep))}")
                deps.append(await self.resolve(owner, dep, env, (*chain, key)))
            try:
                instance = await _call(spec.create, *deps)
            except Exception as err:
                raise ResourceError(f"creating resource {key!r} failed: {type(err).__name__}: {err}") from err
            self._instances[(owner, key)] = instance
            self._created.setdefault(owner, []).append(key)
            return instance

    async def resolve(self, task_id: str, key: str, env: RunEnv | None, chain: tuple[str, ...] = ()) -> Any:
        """Nearest first: the task's own, the exposing parent's, then the worker's (creating
        instances as needed)."""
        if env is not None and key in env.owned:
            return await self.ensure(task_id, key, env, chain)
        if env is not None and key in env.inherited:
            return await self.ensure(env.inherited[key], key, None, chain)
        entry = self.entries.get(key, _MISSING)
        if entry is _MISSING:
            raise ResourceNotFoundError(f"resource {key!r} is not provided to task {task_id!r}", key)
        if isinstance(entry, ResourceSpec):
            if entry.lifetime == "worker":
                return await self.ensure(WORKER, key, None, chain)
            raise ResourceNotFoundError(not_equipped(key), key)
        return entry

    async def ready(self, task_id: str, env: RunEnv | None) -> None:
        """Create whatever the task may ask for that this process has not created yet (worker-
        lifetime ones included: an activity may run before the worker's start has made them)."""
        await self.start()
        if env is None:
            return
        for key in env.owned:
            await self.ensure(task_id, key, env)
        for key, owner in env.inherited.items():
            if self.spec(key) is not None:
                await self.ensure(owner, key)

    async def start(self) -> None:
        """Create the worker-lifetime resources (when the worker starts)."""
        for key, entry in list(self.entries.items()):
            if isinstance(entry, ResourceSpec) and entry.lifetime == "worker":
                await self.ensure(WORKER, key)

    # -- destroying -----------------------------------------------------------------------------

    async def release(self, owner: str) -> tuple[list[str], list[str]]:
        """Destroy ``owner``'s instances, newest first; returns (released keys, ``key: error``)."""
        released, errors = [], []
        for key in reversed(self._created.pop(owner, [])):
            instance = self._instances.pop((owner, key))
            self._locks.pop((owner, key), None)
            spec = self.spec(key)
            try:
                if spec is not None and spec.destroy is not None:
                    await _call(spec.destroy, instance)
                released.append(key)
            except Exception as err:  # one failing destroy must not keep the others alive
                logger.exception("destroying resource %r of %r failed", key, owner or "the worker")
                errors.append(f"{key}: {type(err).__name__}: {err}")
        return released, errors

    async def close(self) -> None:
        """Destroy everything this process still holds (when the worker stops)."""
        for owner in [*self.owners(), WORKER]:
            await self.release(owner)

    # -- what user code sees --------------------------------------------------------------------

    def view(self, task_id: str, env: RunEnv | None) -> "ResourceView":
        """The resources task ``task_id`` sees, as a read-only mapping."""
        return ResourceView(self, task_id, env)


def not_equipped(key: str) -> str:
    return (
        f"resource {key!r} is task-scoped and this task does not equip it: declare it on the tool "
        f"(@tool(resources=[{key!r}])) or in Options(resources=[...])"
    )


_MISSING: Any = object()


class ResourceView(Mapping[str, Any]):
    """The resources one task sees, nearest first, as a read-only mapping (``ToolContext.resources``)."""

    def __init__(self, pool: ResourcePool, task_id: str, env: RunEnv | None) -> None:
        """What ``task_id`` sees of ``pool``: its own instances and inherited ones (per ``env``),
        then the worker's."""
        self._pool, self._task_id, self._env = pool, task_id, env

    def _find(self, key: str) -> Any:
        env, pool = self._env, self._pool
        if env is not None and key in env.owned:
            return pool.instance(self._task_id, key)
        if env is not None and key in env.inherited:
            return pool.instance(env.inherited[key], key)
        entry = pool.entries.get(key, _MISSING)
        if isinstance(entry, ResourceSpec):
            if entry.lifetime == "worker":
                return pool.instance(WORKER, key)
            raise ResourceNotFoundError(not_equipped(key), key)
        return entry

    def __getitem__(self, key: str) -> Any:
        """The resource ``key``, nearest first; KeyError when there is none, ResourceNotFoundError
        for a task-scoped one the task was not equipped with."""
        found = self._find(key)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def get(self, key: str, default: Any = None) -> Any:
        """The resource ``key``, or ``default`` when there is none."""
        found = self._find(key)
        return default if found is _MISSING else found

    def __iter__(self) -> Iterator[str]:
        """The keys of the resources the task can reach, each once."""
        seen: set[str] = set()
        env = self._env
        for key in [*(env.owned if env else ()), *(env.inherited if env else ()), *self._pool.entries]:
            if key not in seen:
                seen.add(key)
                try:
                    if self._find(key) is not _MISSING:
                        yield key
                except ResourceNotFoundError:
                    continue

    def __len__(self) -> int:
        """How many resources the task can reach."""
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        """Whether the task can reach the resource ``key``."""
        try:
            return isinstance(key, str) and self._find(key) is not _MISSING
        except ResourceNotFoundError:
            return False


__all__ = ["WORKER", "ResourcePool", "ResourceView"]
