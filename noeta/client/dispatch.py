"""What a worker can tell of its server's dispatch by priority and fairness key, said once at start.

Tasks carry their priority and fairness key whatever the server (noeta.client.priority): a server
without the feature ignores them and hands out work in arrival order, as before. A client cannot
read a cluster's dynamic config, so for a cluster this names what it needs; for the embedded server
it knows (noeta.client.embedded.DISPATCH_CONFIG).
"""

from __future__ import annotations

import re

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client as TemporalClient

from noeta.client.embedded import EmbeddedServer

#: The first server release that dispatches by priority key with its default configuration.
PRIORITY_SINCE = (1, 29)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


async def dispatch_note(temporal: TemporalClient, server: EmbeddedServer | None) -> str | None:
    """A line for the worker's log when its server may not dispatch by priority or fairness key,
    saying what is lost and what would turn it on; None when it does."""
    info = await temporal.workflow_service.get_system_info(GetSystemInfoRequest())
    version = info.server_version
    if version and _version(version) < PRIORITY_SINCE:
        return (
            f"Temporal server {version} ignores task priorities and fairness keys: tasks are served in arrival "
            f"order (priorities need {'.'.join(map(str, PRIORITY_SINCE))} or later; docs/fairness.md)"
        )
    if server is not None:
        if server.fairness:
            return None
        return (
            "the embedded Temporal server was started without fairness (by an older Noeta, or told so): tasks are "
            "served by priority, then in arrival order whatever their tenant; once the process that started it "
            "stops, the next start brings it up with fairness (docs/fairness.md)"
        )
    return (
        "tasks carry their tenant as Temporal's fairness key; the cluster shares its queues by tenant only with "
        "matching.enableFairness=true in its dynamic config (else: priority, then arrival order; docs/fairness.md)"
    )


__all__ = ["PRIORITY_SINCE", "dispatch_note"]
