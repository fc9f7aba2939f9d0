"""Forking a task: a new task whose transcript is a source task's up to one of its model turns,
which it decides anew under settings of its own (see :mod:`noeta.protocols.forks`).

The fork's input is built from the source's record: its first run's input (the settings it was
started with), overridden by every setting the caller's Options change from their defaults, and a
:class:`~noeta.protocols.forks.ForkPoint` holding the source turn's recorded request (the stored
transcript head and the messages added since). Nothing of the source is changed or copied.

The source may also be an export (``noeta.sdk.testing.load_task``) taken on another cluster: its
bodies are put into this installation's content store first, and the fork starts from its record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from temporalio.client import Client as TemporalClient

from noeta.client.events import history_runs
from noeta.client.export import LoadedTask
from noeta.client.options import Options, build_task_input
from noeta.client.projection.turns import RecordedTask, RecordedTurn, recorded_turns
from noeta.client.task_input import check_goal, task_provider_name
from noeta.context.content_store import ContentStore
from noeta.errors import ConfigurationError, TurnNotFoundError
from noeta.protocols.appends import goal_message
from noeta.protocols.forks import ForkPoint
from noeta.protocols.task import TaskInput

#: TaskInput fields a fork never takes from Options: what the source's record or the fork's own
#: start decides (its goal, where it runs, its indexing, its run state).
_FROM_RECORD = frozenset(
    {"goal", "images", "keep_open", "trace_id", "workspace_dir", "index", "index_cost", "carry", "fork",
     "inherited_resources"}
)
#: Fields that change together: the tools a task offers are its own tools and its MCP servers'.
_TOOLS = ("tools", "tool_fingerprints", "mcp_servers")


async def source_record(temporal: TemporalClient, task_id: str) -> tuple[RecordedTask, str]:
    """The source task's recorded turns, read from its history (every run; TaskNotFoundError for
    an unknown task), and the task queue it was started on (where a fork runs by default)."""
    runs = await history_runs(temporal, task_id)
    queue = runs[0][0].workflow_execution_started_event_attributes.task_queue.name if runs and runs[0] else ""
    return recorded_turns(runs), queue


def load_bodies(task: LoadedTask, store: ContentStore) -> int:
    """Put an exported task's bodies into ``store`` (under the same hashes: the record's references
    resolve there), so a fork of it runs on this installation; returns how many."""
    bodies = task.store.items()
    for _, data in bodies:
        store.put(data)
    return len(bodies)


def fork_turn(record: RecordedTask, task_id: str, at_turn: int) -> RecordedTurn:
    """The recorded turn ``at_turn`` of ``task_id``; TurnNotFoundError naming the valid range."""
    numbers = [t.number for t in record.turns]
    for turn in record.turns:
        if turn.number == at_turn:
            return turn
    if not numbers:
        raise TurnNotFoundError(f"task {task_id!r} has no recorded model turn yet: there is nothing to fork", task_id)
    valid = range(min(numbers), max(numbers) + 1)
    raise TurnNotFoundError(
        f"task {task_id!r} has no turn {at_turn!r}: its recorded turns are {valid.start}..{valid.stop - 1}",
        task_id,
        valid,
    )


def goal_turns_before(turns: Iterable[RecordedTurn], at_turn: int) -> int:
    """Model calls made in ``at_turn``'s goal before it: a goal starts at the turn whose messages
    hold the human's goal."""
    count = 0
    for turn in turns:
        if any(m.origin == "human" for m in turn.request.append):
            count = 0
        if turn.number == at_turn:
            return count
        count += 1
    return count


def fork_input(
    record: RecordedTask,
    source_id: str,
    at_turn: int,
    options: Options | None,
    goal: str | None,
    task_id: str,
) -> TaskInput:
    """The fork's workflow input: the source's recorded settings, each one ``options`` sets
    (differs from Options' default) replaced, and the fork point at ``at_turn``. ``goal``, when
    given, is added as the human's message after the recorded ones (and names the fork)."""
    source = record.task
    if source is None:
        raise ConfigurationError(f"task {source_id!r} has no recorded start: it cannot be forked")
    turn = fork_turn(record, source_id, at_turn)
    if goal is not None:
        check_goal(goal)
    options = options or Options()
    name = goal if goal is not None else source.goal
    given = build_task_input(options, name, provider_name=task_provider_name(options.provider), task_id=task_id)
    default = build_task_input(Options(), name, provider_name=task_provider_name(None), task_id=task_id)
    values = {}
    tools_changed = any(getattr(given, f) != getattr(default, f) for f in _TOOLS)
    for f in dataclasses.fields(TaskInput):
        if f.name in _FROM_RECORD:
            continue
        mine = getattr(given, f.name)
        if f.name == "provider":
            changed = options.provider is not None
        elif f.name in _TOOLS:
            changed = tools_changed
        else:
            changed = mine != getattr(default, f.name)
        if changed:
            values[f.name] = mine
    append = list(turn.request.append)
    if goal is not None:
        append.append(goal_message(goal))
    point = ForkPoint(
        source_task_id=source_id,
        turn=at_turn,
        head=turn.request.head,
        append=append,
        goal_turns=goal_turns_before(record.turns, at_turn),
    )
    return dataclasses.replace(source, **values, goal=name, trace_id=None, index=False, index_cost=False, carry=None, fork=point)

