"""Build a Temporal worker that runs AgentWorkflow and its activities for a :class:`Registry`.

A registry names what this worker can run: tools, providers and resources (live objects, or
``equip_resource`` specs the worker creates per task or per worker), plus the content store
shared with clients. ``noeta worker --registry pkg.module:registry`` (or ``python worker.py``)
loads one by import path.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from temporalio.client import Client as TemporalClient
from temporalio.worker import Worker

from noeta.activities.registry import Registry
from noeta.temporal.converter import is_noeta_converter
from noeta.errors import ConfigurationError
from noeta.protocols.ids import check_task_queue
from noeta.config.import_path import load_object
from noeta.worker.plugin import NoetaWorkerPlugin
from noeta.config.tuning import WorkerTuning
from noeta.config.deployment import DeploymentSettings
from noeta.workflows.upgrades import set_check_seconds


def _is_registry(value: object) -> TypeGuard[Registry]:
    return isinstance(value, Registry)


def load_registry(path: str) -> Registry:
    """Import ``module:attribute``; the attribute is a Registry or a callable returning one."""
    return load_object(path, _is_registry, "Registry", "registry")


def build_worker(
    client: TemporalClient,
    registry: Registry,
    task_queue: str,
    *,
    tuning: WorkerTuning | None = None,
    deployment: DeploymentSettings | None = None,
    **worker_kwargs: Any,
) -> Worker:
    """A temporalio Worker for AgentWorkflow and the registry's activities (see :class:`NoetaWorkerPlugin`).

    ``tuning`` (default: from the environment) sets concurrency, cache and thread pools; other
    ``temporalio.worker.Worker`` arguments pass through and win over it.
    """
    registry.store()  # refuse a registry without a content store before connecting anything
    check_task_queue(task_queue)
    if not is_noeta_converter(client.data_converter):
        raise ConfigurationError(
            "the Temporal client does not use Noeta's data converter: connect it with "
            "plugins=[NoetaPlugin()] (or use noeta's AsyncClient.connect)"
        )
    tuning = tuning or WorkerTuning()
    deployment = deployment or DeploymentSettings()
    versioning: dict[str, Any] = {}
    if deployment.versioned:
        set_check_seconds(deployment.upgrade_check_seconds)
        versioning["deployment_config"] = deployment.worker_config()
    return Worker(
        client,
        task_queue=task_queue,
        plugins=[NoetaWorkerPlugin(registry, tuning)],
        **{**tuning.worker_kwargs(), **versioning, **worker_kwargs},
    )


__all__ = ["DeploymentSettings", "Registry", "WorkerTuning", "build_worker", "load_registry"]
