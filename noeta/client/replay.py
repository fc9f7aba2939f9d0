"""Replaying recorded tasks against a change: for each recorded model turn, rebuild the turn's
request from the record under the changed settings, ask the (new) provider, and compare its
decision with the recorded one. No tool runs and nothing is written: every turn is asked with the
transcript *as recorded* (the recorded tool results), so each answer says what the change would
have decided at that point of the task.

The request is built by the same function as the worker's ``call_model`` builds it
(:func:`noeta.context.requests.model_request`), from the bodies the record points at.

With a policy, each turn is first decided by the policy from the View the workflow had before it
(:mod:`noeta.client.policy_replay`): its model call is answered by the provider (without one, by
the record when its request is the recorded one), its tool calls or finish are compared directly.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from noeta.client.export import LoadedTask
from noeta.client.policy_replay import PolicyJudge, PolicyStep, decided_without_model, request_difference
from noeta.client.projection.turns import RecordedTask, RecordedTurn
from noeta.config.import_path import load_object
from noeta.context.content_store import ContentNotFoundError, ContentStore
from noeta.context.compaction import compacted, load_view
from noeta.context.requests import model_request, offered_tools
from noeta.context.transcript import TranscriptStore
from noeta.errors import ConfigurationError
from noeta.protocols.decisions import CallModel
from noeta.protocols.messages import LLMProvider, LLMRequest, LLMResponse
from noeta.protocols.policy import Policy
from noeta.protocols.turns import TurnDecision, decision_of


@dataclass(frozen=True)
class ReplayChanges:
    """What a replay changes in each recorded request (None: as recorded)."""

    model: str | None = None
    system_prompt: str | None = None
    """Replaces the task's system prompt; the stable content channels recorded after it stay."""
    temperature: float | None = None
    max_tokens: int | None = None


def replay_provider(
    provider: LLMProvider | str | None,
    policy: object | None,
    changes: ReplayChanges,
    *,
    what: str = "provider",
    environment_default: bool = True,
) -> LLMProvider | None:
    """The provider a replay asks: an object as given; ``package.module:attribute`` (an object, or
    a factory of one); a built-in provider's name; None: the environment's default provider
    (``environment_default``, the CLI's), else none at all. None is returned when the record may
    answer instead (a policy is replayed and no change touches the requests), and without
    ``environment_default`` whenever a policy is replayed (replay_tasks then says a changed
    request needs a provider). ``what`` names the setting in errors (``--provider`` for the CLI)."""
    if provider is None and policy is not None and (changes == ReplayChanges() or not environment_default):
        return None
    if provider is None and not environment_default:
        raise ConfigurationError("replay needs a provider to ask: provider=..., or Options(provider=...)")
    if provider is not None and not isinstance(provider, str):
        return provider
    if provider is not None and ":" in provider:
        return load_object(provider, _is_provider, "provider", what)
    from noeta.providers.defaults import default_provider

    return default_provider(provider)


def _is_provider(value: object) -> TypeGuard[LLMProvider]:
    return isinstance(value, LLMProvider) and not isinstance(value, type)


@dataclass(frozen=True)
class ChangedDecision:
    """A turn whose decision changed: the task, the turn, what was decided then and now."""

    task_id: str
    turn: int
    recorded: TurnDecision
    new: TurnDecision | PolicyStep
    """The new decision: a model's (or a policy's tool calls or answer), or a policy's step no
    model decision stands for (replaying a policy)."""


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
    view = load_view(store.get(inp.context.view)) if inp.context is not None else None
    whole = transcripts.load(inp.head) + tuple(inp.append)
    transcript = transcripts.resolve(compacted(view, inp.context.folded if inp.context else 0, whole))
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
    tasks: Sequence[LoadedTask],
    provider: LLMProvider | None,
    changes: ReplayChanges = ReplayChanges(),
    policy: Policy | None = None,
) -> ReplayReport:
    """Ask every recorded turn of ``tasks`` again under ``changes`` and compare decisions (one turn
    at a time, in order): ``provider`` answers each turn's request or, with ``policy``, the policy
    decides first and the provider answers its model calls (see the module). ConfigurationError
    without a provider when there is no policy, or when ``changes`` change every request."""
    if provider is None and (policy is None or changes != ReplayChanges()):
        raise ConfigurationError(
            "replay needs a provider to ask: provider=..., or Options(provider=...)"
            + ("; a changed model or request settings can only be answered by one" if policy is not None else "")
        )
    changed: list[ChangedDecision] = []
    skipped: list[SkippedTurn] = []
    asked = 0
    for task in tasks:
        record = task.recorded()
        transcripts = TranscriptStore(task.store)
        judge = None
        if policy is not None:
            judge = PolicyJudge(policy, record, task.task_id, transcripts, changes.model, changes.system_prompt)
        for turn in record.turns:
            try:
                new = await _new_decision(turn, record, task, provider, changes, transcripts, judge)
            except ContentNotFoundError as err:
                skipped.append(SkippedTurn(task.task_id, turn.number, f"a stored body is missing ({err})"))
                continue
            asked += 1
            if not new.same_as(turn.decision):
                changed.append(ChangedDecision(task.task_id, turn.number, turn.decision, new))
    return ReplayReport(len(tasks), asked, tuple(changed), tuple(skipped))


async def _new_decision(
    turn: RecordedTurn,
    record: RecordedTask,
    task: LoadedTask,
    provider: LLMProvider | None,
    changes: ReplayChanges,
    transcripts: TranscriptStore,
    judge: PolicyJudge | None,
) -> TurnDecision | PolicyStep:
    """The decision taken now at ``turn``: the policy's (when judged), else the provider's."""
    asked = turn
    if judge is not None:
        decision = judge.decide(turn)
        if not isinstance(decision, CallModel):
            return decided_without_model(decision)
        asked = judge.model_call(turn, decision)
        if provider is None:
            if asked.request == turn.request:
                return turn.decision  # the recorded request: the recorded answer is its answer
            return PolicyStep(f"calls the model with {request_difference(turn, asked)}; no provider to answer")
    assert provider is not None  # replay_tasks refuses a replay without one and without a policy
    request = rebuild_request(asked, record, task.store, changes, transcripts)
    return decision_of((await ask(provider, request)).content)
