"""The CLI of versioned agents and worker versions (docs/versions.md): ``--agent`` on ``noeta run``
and ``noeta start``, ``noeta versions`` (which versions still have running tasks and which may be
retired) and ``noeta replay --agent A --under B`` (the deploy gate: exit 1 when a decision changed).

The catalog agent names resolve in is ``--agents`` or else the ``NOETA_AGENTS`` setting, as the
client reads it (``package.module:attribute``, an Agents).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from noeta.errors import ConfigurationError

if TYPE_CHECKING:  # the parser imports this module: the client side loads only when a command runs
    from noeta.activities.registry import Registry
    from noeta.client.agents import Agents
    from noeta.client.client import AsyncClient
    from noeta.client.options import Options

#: ``noeta replay``'s exit code when a decision changed (a CI job fails the rollout on it).
EXIT_CHANGED = 1


def _catalog_flag(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--agents", metavar="package.module:attribute",
                     help="the agent catalog (an Agents) agent names resolve in (default: NOETA_AGENTS)")


def add_agent_flags(cmd: argparse.ArgumentParser) -> None:
    """``--agent NAME[@N]`` and ``--agents`` on ``noeta run`` / ``noeta start``."""
    cmd.add_argument("--agent", metavar="NAME[@N]",
                     help="start the task as this agent of the catalog: its current (or ramping) version, or version N; "
                          "the other flags given override its settings")
    _catalog_flag(cmd)


def add_replay_flags(cmd: argparse.ArgumentParser) -> None:
    """``noeta replay``'s deploy gate: ``--agent A --under B [--last N]``."""
    cmd.add_argument("--agent", metavar="NAME@N",
                     help="replay the last recorded tasks of this agent version (instead of TASK|FILE) under --under")
    cmd.add_argument("--under", metavar="NAME@N", help="the agent version to ask them again under (with --agent)")
    cmd.add_argument("--last", type=int, default=20, metavar="N",
                     help="how many of --agent's most recent closed tasks (default 20)")
    _catalog_flag(cmd)


def add_parser(command: Any) -> None:
    """``noeta versions`` on the CLI's parser (``command`` adds a subcommand)."""
    cmd = command(
        "versions", "agent versions and worker versions: running tasks, and which may be retired",
        "For each version of each agent of the catalog (--agents or NOETA_AGENTS) and each version of each Worker "
        "Deployment, the tasks running on it (from visibility) and whether it may be retired: no running task, "
        "and neither current nor ramping.",
    )
    _catalog_flag(cmd)
    cmd.add_argument("--json", action="store_true", help="one JSON object per line")


def catalog(client: AsyncClient, args: argparse.Namespace) -> Agents:
    """The catalog of ``--agents``, else the client's (NOETA_AGENTS); ConfigurationError without one."""
    if getattr(args, "agents", None):
        client.agents = args.agents
    agents = client.agents
    if agents is None:
        raise ConfigurationError("no agent catalog: set NOETA_AGENTS=package.module:attribute (an Agents) or give --agents")
    return agents


def serve_agent(registry: Registry, options: Options) -> None:
    """Add to ``noeta run``'s registry the objects an agent version's Options carry (its tools,
    guards, validators, output models, resources and provider objects), beside the registry's own
    (ConfigurationError for another object of the same name)."""
    from noeta.client.task_input import task_provider_name
    from noeta.protocols.messages import LLMProvider
    from noeta.sdk._query import add_carried

    add_carried(registry, options)
    if isinstance(options.provider, LLMProvider):
        registry.add_provider(options.provider, name=task_provider_name(options.provider))


async def cmd_versions(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta versions``: each agent version and worker version with its running tasks and whether
    it may be retired."""
    import json

    from noeta.client.version_report import agent_versions, worker_versions

    uses = []
    if getattr(args, "agents", None) or client.agents is not None:
        uses += await agent_versions(client.temporal, catalog(client, args))
    uses += await worker_versions(client.temporal)
    for use in uses:
        if args.json:
            print(json.dumps({"kind": use.kind, "version": use.version, "running": use.running,
                              "routing": use.routing or None, "retirable": use.retirable}))
        else:
            retire = "may be retired" if use.retirable else "keep"
            print(f"{use.kind:<7} {use.version:<40} running {use.running:<6} {use.routing or '-':<14} {retire}")
    if not uses and not args.json:
        print("no agent catalog (NOETA_AGENTS, --agents) and no worker deployments")
    return 0


async def cmd_agent_replay(args: argparse.Namespace) -> int:
    """``noeta replay --agent A --under B [--last N]``: the last N closed tasks of agent version A
    asked again under version B; prints the changed decisions, exit 1 when there is one."""
    from noeta.client.agent_replay import replay_versions
    from noeta.client.client import AsyncClient

    if not args.under:
        raise ConfigurationError("--agent needs --under: the agent version to replay its tasks under")
    given = [flag for flag, value in (("--model", args.model), ("--system-prompt", args.system_prompt),
                                      ("--policy", args.policy), ("TASK|FILE", args.tasks)) if value]
    if given:
        raise ConfigurationError(f"--agent compares two agent versions' settings: leave out {', '.join(given)}")
    if args.last < 1:
        raise ConfigurationError(f"--last must be at least 1, got {args.last}")
    client = await AsyncClient.connect()
    try:
        report = await replay_versions(client, catalog(client, args), args.agent, args.under, last=args.last,
                                       provider=args.provider)
    finally:
        await client.close()
    print(report.summary(), flush=True)
    return EXIT_CHANGED if report.changed else 0


__all__ = [
    "EXIT_CHANGED", "add_agent_flags", "add_parser", "add_replay_flags", "catalog", "cmd_agent_replay", "cmd_versions",
    "serve_agent",
]
