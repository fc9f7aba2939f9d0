"""HostConfig: where a host runs its tasks (cluster, data directory, content store, task queue,
streaming, encryption, metrics, prices)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from temporalio.converter import PayloadCodec
from temporalio.runtime import Runtime

from noeta.client.config import Settings
from noeta.context.content_store import ContentStore
from noeta.providers.pricing import PriceTable
from noeta.protocols.messages import StreamDelta


@dataclass(frozen=True)
class HostConfig:
    """Where the host runs tasks: cluster, data directory, content store, task queue."""

    settings: Settings = field(default_factory=Settings)
    content_store: ContentStore | None = None
    """Defaults to the local store under ``settings.home``; must be the workers' store."""
    task_queue: str | None = None
    delta_sink: Callable[[StreamDelta], Any] | None = None
    """Receives streamed pieces of model responses (``StreamDelta``) of every task, from any
    worker: through Redis pub/sub when ``NOETA_DELTA_BROKER`` is set (workers and clients in other
    processes), else from the workers of this process (``query()``'s). Deltas are ordered per call
    (``seq``) and a retried attempt's pieces carry its attempt number, so a consumer can drop the
    partial text of the attempt that failed. History records only final responses."""
    codec: PayloadCodec | None = None
    """Encrypts every payload written to Temporal; None: the environment's
    (``NOETA_ENCRYPTION_KEYS`` / ``NOETA_CODEC``, see docs/security.md), else plain JSON."""
    runtime: Runtime | None = None
    """A Temporal Runtime that exports metrics (``noeta.telemetry.metrics.runtime_for``)."""
    resources: Mapping[str, Any] = field(default_factory=dict)
    """Live objects by key for the in-process workers of ``query()`` (the process-wide default of
    this host; ``run_with`` and ``query(resources=...)`` add to it per run)."""
    prices: PriceTable | None = None
    """How in-process workers (``query()``) price model calls; None: ``NOETA_PRICES`` over the
    genai-prices catalogue (docs/budgets.md)."""

    def store(self) -> ContentStore:
        """The content store to use: the one given, else the one the settings describe."""
        return self.content_store or self.settings.content_store()
