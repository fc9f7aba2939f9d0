"""``noeta queue-limits``: the server-side caps and tenant weights of a task queue, shown or set
(noeta.client.queue_limits; docs/fairness.md)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from noeta.errors import ConfigurationError

if TYPE_CHECKING:  # the parser imports this module: the client side loads only when the command runs
    from noeta.client.client import AsyncClient
    from noeta.client.queue_limits import QueueLimits


def limits_from(args: argparse.Namespace) -> QueueLimits:
    """What the flags ask for; with ``--from-config`` the configured quotas and weights under them."""
    from noeta.client.priority import FairnessSettings, parse_tenant_weights
    from noeta.client.queue_limits import QueueLimits, model_call_rate
    from noeta.providers.limits import ProviderLimitSettings

    activity_rps, weights = None, {}
    if args.from_config:
        activity_rps = model_call_rate(ProviderLimitSettings().limits)
        if activity_rps is None:
            raise ConfigurationError("--from-config: NOETA_PROVIDER_LIMITS states no request quota to derive a cap from")
        weights = dict(FairnessSettings().tenant_weights)
    for entry in args.weight:
        weights.update(parse_tenant_weights(entry))
    return QueueLimits(
        activity_rps=args.activity_rps if args.activity_rps is not None else activity_rps,
        tenant_rps=args.tenant_rps,
        weights=weights,
    )


def _text(described: dict[str, Any]) -> str:
    lines = []
    for kind, queue in described.items():
        rate = "none" if queue["queue_rps"] is None else f"{queue['queue_rps']:g}/s"
        tenant = "none" if queue["tenant_rps"] is None else f"{queue['tenant_rps']:g}/s per tenant at weight 1"
        weights = ", ".join(f"{k}={v:g}" for k, v in sorted(queue["weights"].items())) or "none (all 1)"
        backlog = ", ".join(f"priority {k}: {n}" for k, n in queue["backlog_by_priority"].items()) or "empty"
        lines.append(
            f"{kind}: cap {rate} (in force: {queue['effective_rps']:g}/s); {tenant}; weights {weights}; backlog {backlog}"
        )
    return "\n".join(lines)


async def cmd_queue_limits(client: AsyncClient, args: argparse.Namespace) -> int:
    """Set what the flags say (nothing without flags), then print the queue's limits, weights and
    backlog by priority as the server has them."""
    from noeta.client.queue_limits import QueueLimits, apply_queue_limits, describe_queue

    queue = args.task_queue or client.task_queue
    limits = limits_from(args)
    if limits != QueueLimits():
        await apply_queue_limits(client.temporal, queue, limits)
    described = await describe_queue(client.temporal, queue)
    print(json.dumps({"task_queue": queue, **described}, indent=2) if args.json else _text(described))
    return 0


def add_parser(command: Any) -> None:
    """``noeta queue-limits`` on the CLI's parser (``command`` adds a subcommand)."""
    p = command(
        "queue-limits", "show or set the server's caps and tenant weights on a task queue (docs/fairness.md)",
        "Temporal hands a task queue's activities to the whole fleet of workers no faster than its cap, each tenant "
        "no faster than the per-tenant cap times its weight, and shares the queue between tenants by weight. "
        "Without flags: show them. Changes apply at once, without restarting workers.",
    )
    p.add_argument("--task-queue", help="the queue (default: NOETA_TASK_QUEUE or 'noeta')")
    p.add_argument("--from-config", action="store_true",
                   help="cap activities at the sum of NOETA_PROVIDER_LIMITS' quotas and set NOETA_TENANT_WEIGHTS")
    p.add_argument("--activity-rps", type=float, metavar="N",
                   help="cap the queue's activities (model and tool calls) at N a second; 0 removes the cap")
    p.add_argument("--tenant-rps", type=float, metavar="N",
                   help="cap each tenant's activities at N a second times its weight; 0 removes the cap")
    p.add_argument("--weight", action="append", default=[], metavar="TENANT=W",
                   help="a tenant's share relative to the others (default 1; repeatable)")
    p.add_argument("--json", action="store_true", help="print what the server says as JSON")
