"""The deploy gate of an agent version: the last recorded tasks of version A asked again under
version B, each changed decision reported (``noeta replay --agent triage@1 --under triage@2``).

It reuses the decision replay of docs/changing-agents.md: B's system prompt and model replace the
recorded ones in each request, B's policy (if it has one) decides each turn from the View the
workflow had, B's provider (or the one given) answers. No tool runs. A CI job fails the rollout
when the report lists a change it did not expect.
"""

from __future__ import annotations

from typing import Any

from noeta.client.agents import Agents
from noeta.client.export import load_export
from noeta.client.replay import ReplayChanges, ReplayReport, replay_provider, replay_tasks
from noeta.protocols.messages import LLMProvider
from noeta.protocols.names import AGENT_METADATA_KEY, SA_METADATA, WORKFLOW_TYPES_QUERY


async def agent_tasks(client: Any, ref: str, last: int) -> list[str]:
    """The ids of the ``last`` most recently started closed tasks of agent version ``ref``."""
    query = (
        f"{WORKFLOW_TYPES_QUERY} AND {SA_METADATA} = '{AGENT_METADATA_KEY}={ref}' "
        "AND ExecutionStatus != 'Running'"
    )
    ids: list[str] = []
    async for execution in client.temporal.list_workflows(query, limit=last):  # newest first
        if execution.id not in ids:
            ids.append(execution.id)
    return ids


async def replay_versions(
    client: Any, agents: Agents, recorded: str, under: str, *, last: int = 20,
    provider: LLMProvider | str | None = None,
) -> ReplayReport:
    """Replay the last ``last`` tasks of agent version ``recorded`` (``triage@1``) under version
    ``under`` (``triage@2``) on ``client`` (an AsyncClient); ``provider`` answers the changed
    requests (default: ``under``'s provider)."""
    old, new = agents.get(recorded), agents.get(under)
    options = new.options
    changes = ReplayChanges(
        model=options.model if options.model != old.options.model else None,
        system_prompt=options.system_prompt if options.system_prompt != old.options.system_prompt else None,
    )
    policy = options.policy
    answering = replay_provider(provider if provider is not None else options.provider, policy, changes,
                                environment_default=False)
    tasks = [load_export(await client.export(task_id)) for task_id in await agent_tasks(client, old.ref, last)]
    return await replay_tasks(tasks, answering, changes, policy)


__all__ = ["agent_tasks", "replay_versions"]
