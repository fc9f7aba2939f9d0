"""A task's place on its task queue: its priority and its tenant's fair share, as Temporal's ``Priority``.

Every task's workflow starts with ``Priority(priority_key=Options.priority, fairness_key=tenant,
fairness_weight=the tenant's configured weight)``. The server gives a workflow's Priority to each
of its workflow tasks, and to each activity and child workflow (sub-agent) that sets none of its
own, so Noeta's workflow code sets none: the commands it sends stay those of histories recorded
before priorities existed, and replay is unaffected.

=========================  =====================================================================
variable                   meaning
=========================  =====================================================================
``NOETA_FAIRNESS``         ``on`` (default): each task carries its tenant as the fairness key;
                           ``off``: none does, so one queue serves all tenants in arrival order
``NOETA_TENANT_WEIGHTS``   ``acme=2,trial=0.5``: a tenant's share relative to the others (1 when
                           unnamed); ``noeta queue-limits`` also sets them on the server, where
                           they can change without a deploy
=========================  =====================================================================

What the cluster does with them: docs/fairness.md.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator
from temporalio.api.common.v1 import Priority as PriorityProto
from temporalio.common import Priority

from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError
from noeta.protocols.names import DEFAULT_TENANT

#: Temporal's default priority key: the level of a task that sets none.
DEFAULT_PRIORITY = 3
#: The longest fairness key Temporal takes (bytes).
MAX_FAIRNESS_KEY_BYTES = 64
TENANT_WEIGHTS_VARIABLE = "NOETA_TENANT_WEIGHTS"


def parse_tenant_weights(text: str) -> dict[str, float]:
    """``tenant=weight,...`` as a mapping; ConfigurationError naming the variable for anything else."""
    weights: dict[str, float] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        tenant, _, raw = entry.partition("=")
        try:
            weight = float(raw)
        except ValueError:
            weight = math.nan
        if not tenant.strip() or not (math.isfinite(weight) and weight > 0) or tenant.strip() in weights:
            raise ConfigurationError(
                f"{TENANT_WEIGHTS_VARIABLE}: {entry!r} is not tenant=WEIGHT with a weight > 0 (e.g. acme=2,trial=0.5)"
            )
        weights[tenant.strip()] = weight
    return weights


class FairnessSettings(EnvSettings):
    """Whether tasks carry their tenant as Temporal's fairness key, and each tenant's weight."""

    fairness: bool = True
    """``NOETA_FAIRNESS``: tasks carry their tenant as the fairness key (off: no key, arrival order)."""
    tenant_weights: dict[str, float] = Field(default_factory=dict, validation_alias=TENANT_WEIGHTS_VARIABLE)
    """``NOETA_TENANT_WEIGHTS``: each named tenant's weight (others: 1)."""

    @field_validator("tenant_weights", mode="before")
    @classmethod
    def _parse(cls, raw: Any) -> Any:
        return parse_tenant_weights(raw) if isinstance(raw, str) else raw


def fairness_key(tenant: str | None) -> str:
    """The fairness key of a tenant's tasks: the tenant (``default`` for tasks without one), cut to
    the bytes Temporal keeps."""
    key = tenant or DEFAULT_TENANT
    return key.encode()[:MAX_FAIRNESS_KEY_BYTES].decode(errors="ignore")


def task_priority(priority: int | None, tenant: str | None, settings: FairnessSettings | None = None) -> Priority:
    """The Priority a task's workflow starts with: ``priority`` (None: Temporal's default) and,
    unless fairness is off, its tenant's fairness key and configured weight."""
    settings = settings or FairnessSettings()
    if not settings.fairness:
        return Priority(priority_key=priority)
    key = fairness_key(tenant)
    return Priority(priority_key=priority, fairness_key=key, fairness_weight=settings.tenant_weights.get(key))


def priority_key_of(recorded: PriorityProto) -> int:
    """The priority key a workflow was started with, as it runs (unset: DEFAULT_PRIORITY)."""
    return recorded.priority_key or DEFAULT_PRIORITY


__all__ = [
    "DEFAULT_PRIORITY", "FairnessSettings", "TENANT_WEIGHTS_VARIABLE", "fairness_key", "parse_tenant_weights",
    "priority_key_of", "task_priority",
]
