"""What every activity of a worker shares: the registry, the content store, the thread pools, the
records of finished steps and the task-scoped resources.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Any, TypeVar

from pydantic import TypeAdapter

from noeta.activities import mcp as remote
from noeta.activities._attempts import AttemptLedger
from noeta.activities._errors import to_application_error
from noeta.activities._threads import ThreadPool
from noeta.activities.registry import Registry
from noeta.context.blob_cache import BlobCache
from noeta.context.content_store import ContentStore
from noeta.context.step_records import StepOutputs, step_records_for
from noeta.context.transcript import TranscriptStore
from noeta.deltas import DELTA_BROKER_VARIABLE, broker_for
from noeta.errors import (
    ConfigurationError,
    NoetaError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
)
from noeta.pricing import PriceTable
from noeta.protocols.activity_io import CallModelOutput, InvokeToolOutput
from noeta.protocols.resources import RunEnv
from noeta.protocols.scope import deep_freeze
from noeta.protocols.tool import Tool, ToolSpec
from noeta.providers.limits import Limiter
from noeta.resources.context import ActiveRun, CallRecorder
from noeta.resources.pool import ResourcePool
from noeta.tuning import WorkerTuning

#: Characters of a large tool output or answer kept in history in front of its content-store reference.
PREVIEW_CHARS = 512
#: Longest a synchronous tool, guard or validator waits for a free thread before its attempt is
#: handed back to Temporal as a wait (WorkerBusyError).
THREAD_WAIT_SECONDS = 10.0

#: A step whose finished output is recorded, so that a retried attempt returns it.
Step = TypeVar("Step", CallModelOutput, InvokeToolOutput)


async def call_maybe_async(fn: Any, *args: Any, pool: ThreadPool, label: str = "", wait_seconds: float | None = None) -> Any:
    """Call a sync or async callable; sync ones run on ``pool``'s threads so heartbeats keep flowing."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await pool.run(fn, *args, label=label, wait_seconds=wait_seconds)
    if inspect.isawaitable(result):
        return await result
    return result


class ActivityBase:
    """A worker's state; the activity modules add their activities to it (see AgentActivities)."""

    def __init__(self, registry: Registry, tuning: WorkerTuning | None = None) -> None:
        tuning = tuning or WorkerTuning()
        self.registry = registry
        if registry.content_store is None:  # build_worker refuses such a registry first
            raise ConfigurationError("the registry has no content_store; client and worker must share one")
        self.store: ContentStore = registry.content_store
        self.transcripts = TranscriptStore(self.store, tuning.transcript_cache_mb)
        self.blobs = BlobCache(self.store)
        # Two pools: a hung synchronous tool holds a user-code thread, never one that content-store
        # reads and writes (every model call's) need.
        self.io_pool = ThreadPool(tuning.io_threads, "io", "NOETA_IO_THREADS")
        self.user_code_pool = ThreadPool(tuning.sync_tool_threads, "sync-tool", "NOETA_SYNC_TOOL_THREADS")
        self.step_outputs = StepOutputs(registry.step_records or step_records_for(self.store), self.store)
        self.limiters = {name: Limiter(name, limit) for name, limit in registry.provider_limits.items()}
        self._validators: dict[str, tuple[Tool, Any]] = {}
        self._mcp_schemas: dict[str, dict[str, dict[str, Any]]] = {}  # by content hash
        self.delta_broker = registry.delta_broker or broker_for(os.environ.get(DELTA_BROKER_VARIABLE))
        self.pool = ResourcePool(registry.resources)
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

    def mcp_connections(self) -> Any:
        """The worker's MCP connections, created on first use (shared through the registry)."""
        if self.registry.mcp_connections is None:
            self.registry.mcp_connections = remote.load_connections(self.registry.mcp_commands)
        return self.registry.mcp_connections

    async def aclose(self) -> None:
        """Stop what the activities started: MCP connections and the stdio servers behind them,
        and the idle threads of the pools (a hung call keeps its thread until it returns)."""
        self.io_pool.close()
        self.user_code_pool.close()
        connections, self.registry.mcp_connections = self.registry.mcp_connections, None
        if connections is not None:
            await connections.aclose()

    def run(self, task_id: str, env: RunEnv | None, recorder: CallRecorder | None = None) -> ActiveRun:
        """What user code of ``task_id`` sees through expect_resource / expect_scope."""
        return ActiveRun(
            task_id=task_id,
            resources=self.pool.view(task_id, env),
            scope=deep_freeze(env.scope) if env is not None else {},
            recorder=recorder,
        )

    async def _io(self, fn: Any, *args: Any) -> Any:
        """Content-store I/O off the event loop, so every other activity's heartbeats keep going."""
        return await self.io_pool.run(fn, *args, label=getattr(fn, "__name__", "io"))

    async def _user_code(self, fn: Any, *args: Any, label: str, wait_seconds: float = THREAD_WAIT_SECONDS) -> Any:
        return await call_maybe_async(fn, *args, pool=self.user_code_pool, label=label, wait_seconds=wait_seconds)

    # -- finished steps ---------------------------------------------------------------------

    def _recorded(self, key: str, adapter: TypeAdapter[Any]) -> Any:
        """The output recorded for step ``key`` by an earlier attempt, or None."""
        data = self.step_outputs.get(key) if key else None
        return None if data is None else adapter.validate_json(data)

    async def _earlier_output(self, key: str, ledger: AttemptLedger, adapter: TypeAdapter[Step]) -> Step | None:
        """What an earlier attempt of step ``key`` recorded when it finished, if its completion
        never reached Temporal: the step is not run again. None on a first attempt."""
        if ledger.attempt == 1 or not key:
            return None
        recorded: Step | None = await self._io(self._recorded, key, adapter)
        if recorded is None:
            return None
        return dataclasses.replace(recorded, attempt=ledger.attempt, retried=ledger.earlier, from_record=True)

    def _record(self, key: str, adapter: TypeAdapter[Any], output: Any) -> None:
        if key:
            self.step_outputs.put(key, adapter.dump_json(output))

    async def _ready(self, task_id: str, env: RunEnv | None) -> None:
        try:
            await self.pool.ready(task_id, env)
        except NoetaError as err:
            raise to_application_error(err) from err

    def _checked_spec(self, name: str, expected: str | None) -> ToolSpec:
        """The worker's spec of tool ``name``, refused unless it has the fingerprint the task expects."""
        tool = self.registry.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.registry.tools)) or "none"
            raise ToolNotRegisteredError(
                f"tool {name!r} is not registered on this worker (it has: {known}); start the "
                "worker with a registry that includes it"
            )
        spec = self.registry.tool_spec(name)
        if expected is not None and expected != spec.fingerprint:
            raise ToolIdentityMismatchError(
                f"tool {name!r} changed identity: the task recorded fingerprint {expected}, this "
                f"worker has {spec.fingerprint} (version {spec.version!r}). Run the task on a worker "
                "with the recorded tool version, or start a new task."
            )
        return spec
