"""The client's calls that start a task (``AsyncClient.start`` and ``AsyncClient.fork``): a part of
:class:`~noeta.client.client.AsyncClient`, which forwards them here, each handed to
:class:`~noeta.client.tasks.TaskOperations`; and the agent catalog they resolve an ``agent`` name
in (docs/versions.md).

The catalog is the one given to the client (``AsyncClient(..., agents=...)`` or the ``agents``
attribute), else the ``NOETA_AGENTS`` setting (``package.module:attribute``), loaded on first use
so that a client which never starts an agent never imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from typing_extensions import Unpack

from noeta.client.agents import Agents, agent_task_options, load_agents
from noeta.client.connection import Connection
from noeta.client.deltas import ClientDeltas
from noeta.client.export import LoadedTask
from noeta.client.forks import load_bodies
from noeta.client.imports import imported_source
from noeta.client.inspection import Inspection
from noeta.client.options import Options
from noeta.client.start_request import StartAs, StartKeywords
from noeta.client.tasks import TaskOperations, task_id_or_new
from noeta.errors import ConfigurationError
from noeta.protocols.messages import ImageBlock


class StartCalls:
    """Starting tasks, by their Options or by an agent's name and version."""

    def __init__(
        self, connection: Connection, inspection: Inspection, tasks: TaskOperations, deltas: ClientDeltas,
        agents: Agents | str | None,
    ) -> None:
        """Starts go through ``tasks`` and are followed by ``deltas``; a fork of an export puts its
        bodies into ``inspection``'s content store; ``agents``: the catalog (or its path), if any."""
        self._connection = connection
        self._inspection = inspection
        self._tasks = tasks
        self._deltas = deltas
        self._agents = agents

    @property
    def agents(self) -> Agents | None:
        """The agent catalog ``start(goal, agent="triage")`` resolves names in (None: none
        configured). Set it to an Agents, or to its ``package.module:attribute`` path."""
        if isinstance(self._agents, str):
            self._agents = load_agents(self._agents)
        return self._agents

    @agents.setter
    def agents(self, agents: Agents | str | None) -> None:
        self._agents = agents

    def agent_options(self, agent: str, options: Options | None = None, task_id: str | None = None) -> tuple[str, Options]:
        """The id (a new one for None) and Options of a task started as ``agent`` (``"triage"``:
        the current version or, for a ramp's share of task ids, the ramping one; ``"triage@2"``:
        that version), ``options``' own settings over the version's. ConfigurationError for an
        unknown agent or version, or when the client has no catalog."""
        catalog = self.agents
        if catalog is None:
            raise ConfigurationError(
                f"agent {agent!r}: this client has no agent catalog; set NOETA_AGENTS=package.module:attribute "
                "(an Agents) or give the client one (AsyncClient(..., agents=...))"
            )
        task_id = task_id_or_new(task_id)
        return task_id, agent_task_options(catalog, agent, task_id, options)

    async def start(
        self,
        goal: str,
        options: Options | None = None,
        *,
        task_id: str | None = None,
        keep_open: bool = False,
        images: Sequence[ImageBlock] = (),
        workspace_dir: str | Path | None = None,
        provider_name: str | None = None,
        agent: str | None = None,
        **start_as: Unpack[StartKeywords],
    ) -> str:
        """Start a task and return its id (the workflow id). ``agent``: start it as this agent of
        the client's catalog (``"triage"`` or ``"triage@2"``; see :meth:`agent_options`), which
        the task records (events, metadata ``agent=triage@2``, the Temporal UI title) and keeps
        for its whole life. ``start_as``: ``task_queue``, ``api_key_id`` (the ``noeta serve`` key
        that starts it, indexed as NoetaApiKey so the key's spend can be summed), ``tenant`` (its
        NoetaTenant) and ``identity`` (here and below: who acts, as Temporal records it);
        :class:`~noeta.client.start_request.StartKeywords`."""
        started_as = StartAs.given(start_as)
        if agent is not None:
            task_id, options = self.agent_options(agent, options, task_id)
        started = await self._tasks.start(
            goal, options, task_id=task_id, keep_open=keep_open, images=images, workspace_dir=workspace_dir,
            provider_name=provider_name, start_as=started_as,
        )
        self._deltas.follow(started)
        return started

    async def fork(
        self,
        source: str | LoadedTask,
        /,
        *,
        at_turn: int,
        options: Options | None = None,
        goal: str | None = None,
        task_id: str | None = None,
        agent: str | None = None,
        **start_as: Unpack[StartKeywords],
    ) -> str:
        """Start a new task whose transcript is ``source``'s up to its model turn ``at_turn`` (that
        turn is decided anew) and return its id. The fork runs with ``options``' settings where
        they differ from Options' defaults, the source's recorded ones otherwise; ``agent``: with
        that agent version's settings (and ``options``' over them), recorded as the fork's. Tool
        calls before the fork point are not run again (their results come from the record); the
        source is not changed. ``goal``: a message of the human's added at the fork point
        (default: none; the fork carries the source's goal). The fork runs on ``task_queue``, by
        default the source's (its workers have its tools). TurnNotFoundError, naming the valid
        range, for a turn the source has not recorded; TaskNotFoundError for an unknown source.
        ``source`` may be an export read with ``noeta.sdk.testing.load_task`` (a task of another
        cluster): its bodies are put into this client's content store first, and the fork runs on
        this client's task queue. ``tenant``, ``identity``: as for ``start``."""
        started_as = StartAs.given(start_as)  # an unknown keyword is refused before any body is stored
        if agent is not None:
            task_id, options = self.agent_options(agent, options, task_id)
        store = self._inspection.content_store
        source = await imported_source(self._connection.temporal, store, source)  # imported: its export
        if isinstance(source, LoadedTask):
            await asyncio.to_thread(load_bodies, source, store)
        return await self._tasks.fork(
            source, at_turn=at_turn, options=options, goal=goal, task_id=task_id, start_as=started_as,
        )


__all__ = ["StartCalls"]
