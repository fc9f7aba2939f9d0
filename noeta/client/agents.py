"""Named, versioned agents: an ``Options`` under a name and a version, started by name.

A catalog (:class:`Agents`) lives in a module that clients and workers both import (loaded by path
with :func:`load_agents`, ``package.module:attribute``): a client resolves ``"triage"`` or ``"triage@2"``
to Options by itself, without asking a worker, and starts the task with them. The resolved
settings travel in the task's input (system prompt, model, provider, tools, policy, guards,
limits), so the task keeps its agent version for its whole life whatever the catalog says later,
and replay never depends on today's catalog. The version is recorded in the task's metadata
(``agent=triage@2``, always indexed in NoetaMetadata) and its Temporal UI title.

``"triage"`` names the agent's current version (the one :meth:`Agents.set_current` chose, else its
highest), or, for the share of new tasks a ramp sends there, the ramping version: chosen from the
task id (a hash), so the same task id always gets the same version and the choice is recorded like
any other. Rollback: end the ramp (``ramp(name, version, 0)``) or set the current version back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from noeta.config.import_path import load_object
from noeta.errors import ConfigurationError
from noeta.protocols.names import AGENT_METADATA_KEY

if TYPE_CHECKING:
    from noeta.client.options import Options


@dataclasses.dataclass(frozen=True)
class AgentVersion:
    """One version of a named agent."""

    name: str
    version: int
    options: Options

    @property
    def ref(self) -> str:
        """``name@version``, as tasks record it."""
        return f"{self.name}@{self.version}"

    def task_options(self) -> Options:
        """The version's Options with the agent recorded in the task's metadata."""
        return dataclasses.replace(self.options, metadata={**self.options.metadata, AGENT_METADATA_KEY: self.ref})


def ramped(task_id: str, percent: float) -> bool:
    """Whether task ``task_id`` is among the ``percent`` % of new tasks a ramp takes (a stable hash)."""
    bucket = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:4], "big") % 10_000
    return bucket < percent * 100


class Agents:
    """A catalog of named agent versions and their ramps (see the module)."""

    def __init__(self, versions: Iterable[AgentVersion] = ()) -> None:
        """Starts with ``versions``; :meth:`add` and :meth:`ramp` add more."""
        self._versions: dict[str, dict[int, AgentVersion]] = {}
        self._ramps: dict[str, tuple[int, float]] = {}
        self._current: dict[str, int] = {}
        for version in versions:
            self._versions.setdefault(version.name, {})[version.version] = version

    def add(self, name: str, version: int, options: Options) -> AgentVersion:
        """Register ``options`` as version ``version`` of agent ``name`` (a version is never replaced)."""
        if not name or "@" in name or isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ConfigurationError(f"an agent is a name without '@' and a version from 1, got {name!r}@{version!r}")
        versions = self._versions.setdefault(name, {})
        if version in versions and versions[version].options != options:
            raise ConfigurationError(f"agent {name}@{version} exists with other options: add a new version")
        versions[version] = AgentVersion(name, version, options)
        return versions[version]

    def set_current(self, name: str, version: int) -> None:
        """Make ``version`` what ``name`` starts (promotion, or rollback to an earlier one)."""
        self.get(f"{name}@{version}")
        self._current[name] = version

    def ramp(self, name: str, version: int, percent: float) -> None:
        """Send ``percent`` % of new tasks started as ``name`` to ``version`` (0 ends the ramp: rollback)."""
        self.get(f"{name}@{version}")
        if not 0 <= percent <= 100:
            raise ConfigurationError(f"a ramp is a percentage from 0 to 100, got {percent!r}")
        if percent == 0:
            self._ramps.pop(name, None)
        else:
            self._ramps[name] = (version, percent)

    def get(self, ref: str) -> AgentVersion:
        """``name@version`` exactly, or ``name``'s current version (ConfigurationError if unknown)."""
        name, _, number = ref.partition("@")
        versions = self._versions.get(name)
        if not versions:
            raise ConfigurationError(f"no agent {name!r} (known: {', '.join(sorted(self._versions)) or 'none'})")
        if number:
            if not number.isdigit() or int(number) not in versions:
                raise ConfigurationError(f"agent {name!r} has no version {number!r} (it has {sorted(versions)})")
            return versions[int(number)]
        return versions[self._current.get(name, max(versions))]

    def choose(self, ref: str, task_id: str) -> AgentVersion:
        """The version a new task ``task_id`` started as ``ref`` runs: ``get(ref)``, or the ramping
        version for the share of task ids its ramp takes."""
        name = ref.partition("@")[0]
        if "@" not in ref and name in self._ramps:
            version, percent = self._ramps[name]
            if ramped(task_id, percent):
                return self._versions[name][version]
        return self.get(ref)

    def current(self, name: str) -> int:
        """The version ``name`` starts outside a ramp (set_current's, else the highest)."""
        return self.get(name).version

    def ramping(self, name: str) -> tuple[int, float] | None:
        """The version ``name`` ramps and its percentage of new tasks, or None."""
        return self._ramps.get(name)

    def names(self) -> dict[str, list[int]]:
        """Each agent's versions."""
        return {name: sorted(versions) for name, versions in sorted(self._versions.items())}


def _is_agents(value: object) -> TypeGuard[Agents]:
    return isinstance(value, Agents)


def load_agents(path: str) -> Agents:
    """The catalog at ``package.module:attribute``: an Agents or a callable returning one."""
    return load_object(path, _is_agents, "Agents", "agents")


def agent_of(metadata: Mapping[str, Any]) -> tuple[str, int] | None:
    """The agent name and version a task's metadata records (``agent=triage@2``), or None."""
    name, _, number = str(metadata.get(AGENT_METADATA_KEY) or "").partition("@")
    return (name, int(number)) if name and number.isdigit() else None


def with_settings(base: Options, given: Options | None) -> Options:
    """``base`` with every setting ``given`` changes from Options' defaults (a task's own settings
    over its agent version's, as a fork's over its source's); metadata is added to ``base``'s."""
    from noeta.client.options import Options

    if given is None:
        return base
    default = Options()
    changed = {f.name: getattr(given, f.name) for f in dataclasses.fields(Options)
               if getattr(given, f.name) != getattr(default, f.name)}
    changed["metadata"] = {**base.metadata, **given.metadata}
    return dataclasses.replace(base, **changed)


def agent_task_options(agents: Agents, agent: str, task_id: str, options: Options | None = None) -> Options:
    """The Options task ``task_id`` started as ``agent`` runs with: the version chosen for it (a
    ramp's share included), ``options``' own settings over it, the version in its metadata."""
    chosen = agents.choose(agent, task_id)
    return dataclasses.replace(chosen, options=with_settings(chosen.options, options)).task_options()


async def start_agent(client: Any, agents: Agents, goal: str, agent: str, *, task_id: str | None = None, **start: Any) -> str:
    """Start ``goal`` as agent ``agent`` (``"triage"`` or ``"triage@2"``) on ``client`` (an
    AsyncClient) with the catalog ``agents``; other keyword arguments as ``AsyncClient.start``'s.
    Returns the task id. (A client given a catalog, or NOETA_AGENTS: ``client.start(goal, agent=...)``.)"""
    task_id = task_id or uuid.uuid4().hex
    started: str = await client.start(goal, agent_task_options(agents, agent, task_id), task_id=task_id, **start)
    return started


async def fork_onto(client: Any, agents: Agents, source: str, agent: str, *, at_turn: int, **fork: Any) -> str:
    """Fork ``source`` at ``at_turn`` onto agent version ``agent`` (its settings replace the
    source's; the fork records the new version). Other keyword arguments as ``AsyncClient.fork``'s."""
    forked: str = await client.fork(source, at_turn=at_turn, options=agents.get(agent).task_options(), **fork)
    return forked


__all__ = [
    "AgentVersion", "Agents", "agent_of", "agent_task_options", "fork_onto", "load_agents", "ramped", "start_agent",
    "with_settings",
]
