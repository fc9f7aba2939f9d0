"""What several activity families of one worker share: the registry, the content store and the
transcripts in it, the two thread pools, the records of finished steps, the task-scoped resources
and the price table. One :class:`WorkerServices` per worker, handed to each family that needs it
(see :mod:`noeta.activities.agent`); what only one family uses stays in that family's object.
"""

from __future__ import annotations

import inspect
from typing import Any

from noeta.activities._errors import to_application_error
from noeta.activities._steps import FinishedSteps
from noeta.activities._store_writes import HeldOutputs
from noeta.activities._threads import ThreadPool
from noeta.activities.registry import Registry
from noeta.context.content_store import ContentStore
from noeta.context.step_records import StepOutputs, step_records_for
from noeta.context.transcript import TranscriptStore
from noeta.errors import ConfigurationError, NoetaError, ToolIdentityMismatchError, ToolNotRegisteredError
from noeta.providers.pricing import PriceTable
from noeta.protocols.resources import RunEnv
from noeta.protocols.scope import deep_freeze
from noeta.protocols.tool import ToolSpec
from noeta.resources.context import ActiveRun, CallRecorder
from noeta.resources.pool import ResourcePool
from noeta.config.tuning import SETTINGS as TUNING, WorkerTuning

#: Characters of a large tool output or answer kept in history in front of its content-store reference.
PREVIEW_CHARS = 512
#: Longest a synchronous tool, guard or validator waits for a free thread before its attempt is
#: handed back to Temporal as a wait (WorkerBusyError).
THREAD_WAIT_SECONDS = 10.0


async def call_maybe_async(fn: Any, *args: Any, pool: ThreadPool, label: str = "", wait_seconds: float | None = None) -> Any:
    """Call a sync or async callable; sync ones run on ``pool``'s threads so heartbeats keep flowing."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await pool.run(fn, *args, label=label, wait_seconds=wait_seconds)
    if inspect.isawaitable(result):
        return await result
    return result


class WorkerServices:
    """The state that several activity families of a worker use, built once from its registry."""

    def __init__(self, registry: Registry, tuning: WorkerTuning | None = None) -> None:
        tuning = tuning or WorkerTuning()
        if registry.content_store is None:  # build_worker refuses such a registry first
            raise ConfigurationError("the registry has no content_store; client and worker must share one")
        self.registry = registry
        self.store: ContentStore = registry.content_store
        self.transcripts = TranscriptStore(self.store, tuning.transcript_cache_mb)
        # Two pools: a hung synchronous tool holds a user-code thread, never one that content-store
        # reads and writes (every model call's) need.
        self.io_pool = ThreadPool(tuning.io_threads, "io", TUNING["io_threads"].variable)
        self.user_code_pool = ThreadPool(tuning.sync_tool_threads, "sync-tool", TUNING["sync_tool_threads"].variable)
        self.steps = FinishedSteps(StepOutputs(registry.step_records or step_records_for(self.store), self.store), self.io_pool)
        self.held = HeldOutputs()
        """Finished outputs the store would not take, waiting for their step's next attempt."""
        self.resources = ResourcePool(registry.resources)
        """Live resources created from the registry's equip_resource specs (per task, per worker)."""
        self._env_prices: PriceTable | None = None

    @property
    def prices(self) -> PriceTable:
        """The registry's price table, else ``NOETA_PRICES`` over the catalogue (read once)."""
        if self.registry.prices is not None:
            return self.registry.prices
        if self._env_prices is None:
            self._env_prices = PriceTable.from_env()
        return self._env_prices

    async def io(self, fn: Any, *args: Any) -> Any:
        """Content-store I/O off the event loop, so every other activity's heartbeats keep going."""
        return await self.io_pool.run(fn, *args, label=getattr(fn, "__name__", "io"))

    async def user_code(self, fn: Any, *args: Any, label: str, wait_seconds: float = THREAD_WAIT_SECONDS) -> Any:
        """A user's tool, guard or validator: awaited when async, else on a user-code thread (waiting
        at most ``wait_seconds`` for a free one)."""
        return await call_maybe_async(fn, *args, pool=self.user_code_pool, label=label, wait_seconds=wait_seconds)

    async def active_run(self, task_id: str, env: RunEnv | None, recorder: CallRecorder | None = None) -> ActiveRun:
        """What user code of ``task_id`` sees through expect_resource / expect_scope, its resources
        created first (a resource that cannot be made fails the activity with its error)."""
        try:
            await self.resources.ready(task_id, env)
        except NoetaError as err:
            raise to_application_error(err) from err
        return ActiveRun(
            task_id=task_id,
            resources=self.resources.view(task_id, env),
            scope=deep_freeze(env.scope) if env is not None else {},
            recorder=recorder,
        )

    def close_threads(self) -> None:
        """Let the pools' idle threads go (a hung call keeps its thread until it returns)."""
        self.io_pool.close()
        self.user_code_pool.close()


def checked_spec(registry: Registry, name: str, expected: str | None) -> ToolSpec:
    """The worker's spec of tool ``name``, refused unless it has the fingerprint the task expects."""
    tool = registry.tools.get(name)
    if tool is None:
        known = ", ".join(sorted(registry.tools)) or "none"
        raise ToolNotRegisteredError(
            f"tool {name!r} is not registered on this worker (it has: {known}); start the "
            "worker with a registry that includes it"
        )
    spec = registry.tool_spec(name)
    if expected is not None and expected != spec.fingerprint:
        raise ToolIdentityMismatchError(
            f"tool {name!r} changed identity: the task recorded fingerprint {expected}, this "
            f"worker has {spec.fingerprint} (version {spec.version!r}). Run the task on a worker "
            "with the recorded tool version, or start a new task."
        )
    return spec
