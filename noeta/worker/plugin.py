"""NoetaPlugin: everything a Temporal client and worker must agree on to run Noeta tasks.

Adding Noeta to an existing Temporal application is one line for the client and one for the worker::

    client = await Client.connect("localhost:7233", plugins=[NoetaPlugin()])
    worker = Worker(client, task_queue="agents", plugins=[NoetaWorkerPlugin(registry)])

:class:`NoetaPlugin` carries:

- the data converter (:mod:`noeta.temporal.converter`: pydantic JSON with a process-wide schema cache), with
  an optional payload codec such as encryption;
- interceptors (:mod:`noeta.telemetry.interceptors`): OpenTelemetry tracing when configured, and
  the workflow-side metrics;
- sandbox pass-through of the ``noeta`` package: its workflow-side modules are pure and
  deterministic (a test proves it), so each workflow instance can share the worker's copy instead of
  re-importing them — re-importing cost a quarter of a worker's CPU and a copy of the modules per
  cached workflow. Users' own modules (custom policies) stay sandboxed;

:class:`NoetaWorkerPlugin` adds ``AgentWorkflow`` and the activities that serve a
:class:`~noeta.worker.Registry`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from temporalio.converter import DataConverter, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from noeta.temporal.converter import compact_serializer, data_converter, type_adapter

if TYPE_CHECKING:
    from noeta.activities.registry import Registry
    from noeta.config.tuning import WorkerTuning

PLUGIN_NAME = "noeta.NoetaPlugin"
WORKER_PLUGIN_NAME = "noeta.NoetaWorkerPlugin"

#: Modules the workflow sandbox takes from the worker process instead of re-importing per instance.
PASSTHROUGH_MODULES = ("noeta",)


def sandbox_runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The SDK's default sandbox plus Noeta's pass-through; a runner configured otherwise is kept."""
    if existing is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    if isinstance(existing, SandboxedWorkflowRunner) and existing.restrictions is SandboxRestrictions.default:
        return dataclasses.replace(
            existing, restrictions=existing.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    return existing


class NoetaPlugin(SimplePlugin):
    """Noeta's data converter (with an optional payload codec) and sandbox pass-through.

    Give it to the Temporal client: workers built from that client inherit it.
    """

    def __init__(self, *, codec: PayloadCodec | None = None) -> None:
        """``codec``: a payload codec (e.g. an EncryptionCodec) for every payload; without one, a
        codec already on the client is kept."""
        from noeta.telemetry.interceptors import interceptors  # tracing (when configured) and metrics

        self.codec = codec
        super().__init__(
            PLUGIN_NAME, data_converter=self._converter, workflow_runner=sandbox_runner, interceptors=interceptors()
        )

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        # A codec configured on the client already (e.g. the user's KMS codec) is kept.
        codec = self.codec or (existing.payload_codec if existing else None)
        return data_converter(codec)


def warm_payload_types() -> None:
    """Build the payload converter's (process-wide) adapters and serializers for the workflow's
    inputs, outputs and activity payloads now, as a worker is made. Built on first use instead, the
    first workflow task to send one spends that time inside its activation: on a loaded machine
    over the 2 s after which Temporal's deadlock detector fails the workflow task (it is retried,
    but logs a warning and costs a round trip)."""
    from noeta.protocols import activity_io
    from noeta.protocols.task import TaskInput, TaskResult

    kinds: list[type] = [getattr(activity_io, name) for name in activity_io.__all__]
    for cls in [TaskInput, TaskResult, *(kind for kind in kinds if dataclasses.is_dataclass(kind))]:
        type_adapter(cls)
        compact_serializer(cls)


class NoetaWorkerPlugin(SimplePlugin):
    """``AgentWorkflow`` (both workflow types) and the activities that serve it, for the tools and providers of ``registry``."""

    def __init__(self, registry: Registry, tuning: WorkerTuning | None = None) -> None:
        """``registry``: the tools, providers and resources the worker serves; ``tuning``: its
        concurrency settings (default: from the environment)."""
        # Imported here: the client side needs none of the worker's modules.
        from noeta.activities.agent import AgentActivities
        from noeta.protocols.messages import provider_system
        from noeta.telemetry.agent_span import remember_providers
        from noeta.workflows import WORKFLOWS

        activities = AgentActivities(registry, tuning)
        warm_payload_types()
        remember_providers({name: provider_system(p) for name, p in registry.providers.items()})

        @contextlib.asynccontextmanager
        async def running() -> AsyncIterator[None]:
            # Worker-lifetime resources exist while the worker runs; whatever a task left behind
            # (its release step ran elsewhere) goes when the worker stops, with its MCP connections.
            try:
                await activities.pool.start()
                yield
            finally:
                try:
                    await activities.pool.close()
                finally:
                    await activities.aclose()

        super().__init__(
            WORKER_PLUGIN_NAME,
            workflows=list(WORKFLOWS),
            activities=activities.activities(),
            workflow_runner=sandbox_runner,
            run_context=running,
        )


__all__ = ["PASSTHROUGH_MODULES", "NoetaPlugin", "NoetaWorkerPlugin", "sandbox_runner", "warm_payload_types"]
