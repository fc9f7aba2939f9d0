"""Fleet-wide caps and tenant weights kept by the Temporal server on a task queue (its config).

The server hands a task queue's activities to workers no faster than the queue's rate limit, and
each fairness key (a tenant, noeta.client.priority) no faster than the per-key default times its
weight, whatever the number of workers. ``noeta queue-limits`` sets them from the configured
provider quotas (``NOETA_PROVIDER_LIMITS``) and tenant weights (``NOETA_TENANT_WEIGHTS``), or from
its flags; the worker-side pacing (noeta.providers.limits) stays behind them as a second line
(which one wins when: docs/fairness.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, UpdateTaskQueueConfigRequest
from temporalio.client import Client as TemporalClient

from noeta.providers.limits import ProviderLimit

#: The queues a task's work waits on: its workflow tasks and its activities (model and tool calls).
QUEUE_TYPES = {"workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY}
#: Said on the server with each change (``temporal task-queue config get`` shows it).
REASON = "noeta queue-limits"


def model_call_rate(limits: Mapping[str, ProviderLimit]) -> float | None:
    """The model calls per second the providers' quotas allow together (None: no quota states a
    request count)."""
    rates = [limit.requests / limit.per_seconds for limit in limits.values() if limit.requests is not None]
    return sum(rates) if rates else None


@dataclass(frozen=True)
class QueueLimits:
    """What to set on a task queue. For each rate, None leaves the server's value as it is and 0
    removes it (back to the server's default: no cap)."""

    activity_rps: float | None = None
    """Activities (model and tool calls) dispatched per second on the queue, by all workers together."""
    tenant_rps: float | None = None
    """Activities per second of one tenant (fairness key) at weight 1; a tenant of weight 2 gets twice it."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Tenants' weights, set on the workflow and activity queues (they win over the weight a task
    was started with, and apply to tasks scheduled from now on)."""


def _rate(rps: float | None) -> UpdateTaskQueueConfigRequest.RateLimitUpdate | None:
    if rps is None:
        return None
    if rps == 0:  # a RateLimitUpdate without a rate removes the limit
        return UpdateTaskQueueConfigRequest.RateLimitUpdate(reason=REASON)
    return UpdateTaskQueueConfigRequest.RateLimitUpdate(rate_limit=RateLimit(requests_per_second=rps), reason=REASON)


async def apply_queue_limits(temporal: TemporalClient, task_queue: str, limits: QueueLimits) -> None:
    """Set ``limits`` on ``task_queue``: the rates on its activity queue, the weights on both."""
    for kind, queue_type in QUEUE_TYPES.items():
        activity = kind == "activity"
        if not limits.weights and not (activity and (limits.activity_rps is not None or limits.tenant_rps is not None)):
            continue
        request = UpdateTaskQueueConfigRequest(
            namespace=temporal.namespace, identity=temporal.identity, task_queue=task_queue, task_queue_type=queue_type,
            set_fairness_weight_overrides=dict(limits.weights),
        )
        if activity:
            queue_rate, tenant_rate = _rate(limits.activity_rps), _rate(limits.tenant_rps)
            if queue_rate is not None:
                request.update_queue_rate_limit.CopyFrom(queue_rate)
            if tenant_rate is not None:
                request.update_fairness_key_rate_limit_default.CopyFrom(tenant_rate)
        await temporal.workflow_service.update_task_queue_config(request)


async def describe_queue(temporal: TemporalClient, task_queue: str) -> dict[str, Any]:
    """What the server says of ``task_queue``, by queue type: its rate limits and the one in force,
    the tenants' weight overrides, and its backlog by priority key."""
    described: dict[str, Any] = {}
    for kind, queue_type in QUEUE_TYPES.items():
        answer = await temporal.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=temporal.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=queue_type,
            report_stats=True, report_config=True,
        ))
        config = answer.config
        described[kind] = {
            "queue_rps": config.queue_rate_limit.rate_limit.requests_per_second
            if config.HasField("queue_rate_limit") and config.queue_rate_limit.HasField("rate_limit") else None,
            "tenant_rps": config.fairness_keys_rate_limit_default.rate_limit.requests_per_second
            if config.HasField("fairness_keys_rate_limit_default")
            and config.fairness_keys_rate_limit_default.HasField("rate_limit") else None,
            "effective_rps": answer.effective_rate_limit.requests_per_second,
            "weights": dict(config.fairness_weight_overrides),
            "backlog_by_priority": {
                key: stats.approximate_backlog_count for key, stats in sorted(answer.stats_by_priority_key.items())
            },
            "backlog": answer.stats.approximate_backlog_count,
        }
    return described


__all__ = ["QUEUE_TYPES", "QueueLimits", "apply_queue_limits", "describe_queue", "model_call_rate"]
