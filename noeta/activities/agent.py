"""The worker's activities: the I/O side of AgentWorkflow, composed from one object per family.

:class:`AgentActivities` builds, from one registry, the state several families share
(:class:`~noeta.activities._services.WorkerServices`: the store, the transcripts, the thread pools,
the finished-step records, the task-scoped resources, the prices) and the worker's
:class:`~noeta.activities.mcp.McpServers`, then hands each family only those:

- :class:`~noeta.activities.prepare.Preparation`: ``prepare_task``, ``load_transcript``,
  ``release_resources`` (services, MCP servers);
- :class:`~noeta.activities.model_call.ModelCalls`: ``call_model`` (services);
- :class:`~noeta.activities.tool_call.ToolCalls`: ``invoke_tool`` (services, MCP servers);
- :class:`~noeta.activities.checks.Checks`: ``check_guards``, ``validate_output`` (services);
- :class:`~noeta.activities.compaction.Compactions`: ``compact_context`` (services, the model calls'
  provider limits);
- :class:`~noeta.activities.scoring.Scoring`: ``score_task`` (the registry's TaskScorer).

Activity names come from :mod:`noeta.protocols.names`; the workflow schedules them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from noeta.activities._services import WorkerServices
from noeta.activities.checks import Checks
from noeta.activities.compaction import Compactions
from noeta.activities.mcp import McpServers
from noeta.activities.model_call import ModelCalls
from noeta.activities.prepare import Preparation
from noeta.activities.registry import Registry
from noeta.activities.scoring import Scoring
from noeta.activities.tool_call import ToolCalls
from noeta.resources.pool import ResourcePool
from noeta.config.tuning import WorkerTuning


class AgentActivities:
    """Every activity AgentWorkflow schedules, served from one registry (``activities()``)."""

    def __init__(self, registry: Registry, tuning: WorkerTuning | None = None) -> None:
        """``registry``: what the worker can run; ``tuning``: its concurrency settings (default: from
        the environment)."""
        self.registry = registry
        self.services = WorkerServices(registry, tuning)
        self.mcp = McpServers(registry)
        self.preparation = Preparation(self.services, self.mcp)
        self.model_calls = ModelCalls(self.services)
        self.tool_calls = ToolCalls(self.services, self.mcp)
        self.checks = Checks(self.services)
        self.compactions = Compactions(self.services, self.model_calls)
        self.scoring = Scoring(registry)

    @property
    def pool(self) -> ResourcePool:
        """The live resources, which the worker starts before its first task and closes when it stops."""
        return self.services.resources

    def activities(self) -> list[Callable[..., Any]]:
        """The activity callables to register on a Temporal worker."""
        return [
            self.preparation.prepare_task,
            self.model_calls.call_model,
            self.tool_calls.invoke_tool,
            self.checks.validate_output,
            self.checks.check_guards,
            self.preparation.load_transcript,
            self.preparation.release_resources,
            self.compactions.compact_context,
            self.scoring.score_task,
        ]

    async def aclose(self) -> None:
        """Stop what the activities started: the idle threads of the pools (a hung call keeps its
        thread until it returns), the MCP connections and the stdio servers behind them, the
        connections to shared rate-limit counts."""
        self.services.close_threads()
        try:
            await self.mcp.aclose()
        finally:
            await self.model_calls.aclose()


__all__ = ["AgentActivities"]
