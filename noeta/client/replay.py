"""Replaying recorded tasks against a change: for each recorded model turn, rebuild the turn's
request from the record under the changed settings, ask the (new) provider, and compare its
decision with the recorded one. No tool runs and nothing is written: every turn is asked with the
transcript *as recorded* (the recorded tool results), so each answer says what the change would
have decided at that point of the task.

The request is built by the same function as the worker's ``call_model`` builds it
(:func:`noeta.context.requests.model_request`), from the bodies the record points at.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from noeta.client.export import LoadedTask
from noeta.client.projection.turns import RecordedTask, RecordedTurn
from noeta.context.content_store import ContentNotFoundError, ContentStore
from noeta.context.requests import model_request, offered_tools
from noeta.context.transcript import TranscriptStore
from noeta.protocols.messages import LLMProvider, LLMRequest, LLMResponse
from noeta.protocols.turns import TurnDecision, decision_of


@dataclass(frozen=True)
class ReplayChanges:
    """What a replay changes in each recorded request (None: as recorded)."""

    model: str | None = None
    system_prompt: str | None = None
    """Replaces the task's system prompt; the stable content channels recorded after it stay."""
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class ChangedDecision:
    """A turn whose decision changed: the task, the turn, what was decided then and now."""

    task_id: str
    turn: int
    recorded: TurnDecision
    new: TurnDecision


@dataclass(frozen=True)
class SkippedTurn:
    """A recorded turn that could not be asked again, and why (a body the record lacks)."""

    task_id: str
    turn: int
    reason: str


@dataclass(frozen=True)
class ReplayReport:
    """What a replay found: how many tasks and turns it asked again, and the changed decisions."""

    tasks: int
    turns: int
    """Turns asked again."""
    changed: tuple[ChangedDecision, ...] = ()
    skipped: tuple[SkippedTurn, ...] = ()

    def summary(self) -> str:
        """A table of the changed decisions (and skipped turns) under a one-line count."""
        lines = [
            f"replayed {self.tasks} task(s), {self.turns} turn(s): "
            f"{len(self.changed)} decision(s) changed" + (f", {len(self.skipped)} turn(s) skipped" if self.skipped else "")
        ]
        if self.changed:
            width = max(len("task"), *(len(c.task_id) for c in self.changed))
            lines.append(f"{'task':<{width}}  turn  {'recorded':<50}  new")
            for c in self.changed:
                lines.append(f"{c.task_id:<{width}}  {c.turn:>4}  {c.recorded.describe(50):<50}  {c.new.describe(50)}")
        for s in self.skipped:
            lines.append(f"skipped {s.task_id} turn {s.turn}: {s.reason}")
        return "\n".join(lines)


def rebuild_request(
    turn: RecordedTurn, record: RecordedTask, store: ContentStore, changes: ReplayChanges = ReplayChanges(),
    transcripts: TranscriptStore | None = None,
) -> LLMRequest:
    """The request of a recorded turn under ``changes``, from the bodies in ``store``;
    ContentNotFoundError when one is missing."""
    transcripts = transcripts or TranscriptStore(store)
    inp = turn.request
    inp = dataclasses.replace(
        inp,
        model=changes.model if changes.model is not None else inp.model,
        temperature=changes.temperature if changes.temperature is not None else inp.temperature,
        max_tokens=changes.max_tokens if changes.max_tokens is not None else inp.max_tokens,
    )
    transcript = transcripts.resolve(transcripts.load(inp.head) + tuple(inp.append))
    system = store.get(inp.system_ref).decode() if inp.system_ref else None
    if changes.system_prompt is not None:
        recorded_prompt = (record.task.system_prompt if record.task is not None else None) or ""
        channels = system[len(recorded_prompt):] if system and system.startswith(recorded_prompt) else ""
        system = changes.system_prompt + channels if recorded_prompt else changes.system_prompt + (
            "\n\n" + system if system else ""
        )
    remote: dict[str, dict[str, Any]] = {}
    for ref in (inp.agents_ref, inp.mcp_tools_ref):
        if ref is not None:
            remote.update({t["name"]: t for t in json.loads(store.get(ref))})
    return model_request(
        inp,
        transcript,
        tools=offered_tools(inp.tools, record.tools.get, remote),
        system=system,
        volatile=store.get(inp.volatile_ref).decode() if inp.volatile_ref else "",
        output_schema=json.loads(store.get(inp.output_schema_ref)) if inp.output_schema_ref else None,
    )


async def ask(provider: LLMProvider, request: LLMRequest) -> LLMResponse:
    """The provider's answer to ``request`` (``complete`` may be sync or async)."""
    answer = provider.complete(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if not isinstance(answer, LLMResponse):
        raise TypeError(f"complete() returned {type(answer).__name__}, not LLMResponse")
    return answer


async def replay_tasks(
    tasks: Sequence[LoadedTask], provider: LLMProvider, changes: ReplayChanges = ReplayChanges()
) -> ReplayReport:
    """Ask ``provider`` every recorded turn of ``tasks`` again under ``changes`` and compare
    decisions (one turn at a time, in order)."""
    changed: list[ChangedDecision] = []
    skipped: list[SkippedTurn] = []
    asked = 0
    for task in tasks:
        record = task.recorded()
        transcripts = TranscriptStore(task.store)
        for turn in record.turns:
            try:
                request = rebuild_request(turn, record, task.store, changes, transcripts)
            except ContentNotFoundError as err:
                skipped.append(SkippedTurn(task.task_id, turn.number, f"a stored body is missing ({err})"))
                continue
            new = decision_of((await ask(provider, request)).content)
            asked += 1
            if not turn.decision.same_as(new):
                changed.append(ChangedDecision(task.task_id, turn.number, turn.decision, new))
    return ReplayReport(len(tasks), asked, tuple(changed), tuple(skipped))
