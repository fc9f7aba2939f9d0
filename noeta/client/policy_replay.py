"""Replaying a policy over recorded tasks: at each recorded model turn, the View the workflow had
just before it is rebuilt from the record, and the policy decides from it as it would have inside
the workflow (``decide`` is pure: nothing runs).

The View before turn N is the one the workflow built: its transcript is the stored transcript the
turn's request points at plus the messages added since (tool outputs held as references, as the
workflow holds them), ``usage`` the model usage of the task's earlier turns (a sub-agent's usage,
which the workflow adds when the child ends, is not in it), ``turn`` the model calls made in the
turn's goal so far, ``budget`` what ``max_turns`` leaves of them; no approval is pending before a
model call. The StepContext is the task's recorded one (its model and system prompt as changed).

What the policy decides is compared with the recorded turn (see :mod:`noeta.client.replay`):

- a model call (``CallModel``) is the request it makes: the recorded turn's, with the tools,
  ``temperature`` and ``max_tokens`` the decision asks for. A provider, when given, answers it and
  its decision is compared. Without one, a request equal to the recorded one is answered by the
  record (unchanged); another request is a change no model answered (a :class:`PolicyStep`);
- tool calls (``CallTools``) and a sub-agent (``SpawnSubtask``, compared as a call of the agent's
  name with its goal) are compared with the tool calls the model decided in the turn, a finish
  (``Finish``) with its answer: the policy decided without the model what the model decided there;
- a finish as failed, a value that is not a Decision, or an exception is a :class:`PolicyStep`,
  always a change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeGuard

from noeta.client.projection.turns import RecordedTask, RecordedTurn
from noeta.context.transcript import TranscriptStore
from noeta.errors import ConfigurationError
from noeta.protocols.decisions import CallModel, CallTools, Decision, Finish, SpawnSubtask
from noeta.protocols.messages import Usage
from noeta.protocols.policy import Policy
from noeta.protocols.scope import merge_scopes
from noeta.protocols.step_context import StepContext
from noeta.protocols.turns import ToolCallDecision, TurnDecision
from noeta.protocols.view import View


@dataclass(frozen=True)
class PolicyStep:
    """A policy's decision at a turn that no model's decision stands for: a model call with another
    request that no provider was given to answer, a finish as failed, or the policy's error. It is
    never the same as a recorded decision."""

    text: str

    def same_as(self, other: object) -> bool:
        """Always False: a recorded turn is a model's decision, never this."""
        return False

    def describe(self, limit: int = 60) -> str:
        """The text, cut to ``limit`` characters."""
        text = " ".join(self.text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


class PolicyJudge:
    """Asks ``policy`` at each recorded turn of one task (see the module)."""

    def __init__(
        self, policy: Policy, record: RecordedTask, task_id: str, transcripts: TranscriptStore,
        model: str | None = None, system_prompt: str | None = None,
    ) -> None:
        """``model`` and ``system_prompt`` (None: as recorded) are what the replay changes."""
        task = record.task
        if task is None:
            raise ConfigurationError(f"task {task_id!r} has no recorded start: its policy's context cannot be rebuilt")
        self.policy, self.record, self.task, self.transcripts = policy, record, task, transcripts
        self.ctx = StepContext(
            task_id=task_id,
            trace_id=task.trace_id or task_id,
            model=model if model is not None else task.model,
            tools=list(record.tools.values()),
            max_turns=task.max_turns,
            system_prompt=system_prompt if system_prompt is not None else task.system_prompt,
            metadata=task.metadata,
            scope=merge_scopes(task.scope),
            subagents=tuple(a.name for a in task.subagents),
        )

    def view(self, turn: RecordedTurn) -> View:
        """The View the workflow built before ``turn`` (ContentNotFoundError when the record lacks
        a stored transcript node)."""
        usage, goal_turns = Usage(), self.task.fork.goal_turns if self.task.fork is not None else 0
        for index, earlier in enumerate(self.record.turns):
            starts_goal = any(m.origin == "human" for m in earlier.request.append)
            if starts_goal and not (index == 0 and self.task.fork is not None):
                goal_turns = 0  # a fork's first turn counts on from its source's goal, as the workflow does
            if earlier is turn:
                break
            usage, goal_turns = usage + earlier.response.usage, goal_turns + 1
        transcript = self.transcripts.load(turn.request.head) + tuple(turn.request.append)
        return View(
            transcript=transcript, usage=usage, turn=goal_turns, budget=max(0, self.ctx.max_turns - goal_turns)
        )

    def decide(self, turn: RecordedTurn) -> Decision | PolicyStep:
        """What the policy decides before ``turn``; its exception as a PolicyStep
        (ContentNotFoundError when the record lacks a stored transcript node)."""
        view = self.view(turn)
        try:
            decision: Decision = self.policy.decide(self.ctx, view)
        except Exception as err:  # a bug in the policy: the workflow would fail the task there
            return PolicyStep(f"the policy raised {type(err).__name__}: {err}")
        return decision

    def model_call(self, turn: RecordedTurn, decision: CallModel) -> RecordedTurn:
        """``turn`` with the request ``decision`` makes: the tools, temperature and max_tokens it
        asks for (the task's otherwise), as the workflow's ``call_model`` sets them."""
        task, inp = self.task, turn.request
        tools = decision.tools if decision.tools is not None else [*self.record.tools, *self.ctx.subagents]
        temperature = decision.temperature if decision.temperature is not None else task.temperature
        wanted = decision.max_tokens or task.max_tokens
        max_tokens = wanted
        # A budget lowers max_tokens to the output tokens left; the recorded request shows that cap.
        recorded = inp.max_tokens
        if task.limits is not None and recorded is not None and (task.max_tokens is None or recorded < task.max_tokens):
            max_tokens = recorded if wanted is None else min(wanted, recorded)
        request = dataclasses.replace(inp, tools=list(tools), temperature=temperature, max_tokens=max_tokens)
        return dataclasses.replace(turn, request=request)


def is_policy(value: object) -> TypeGuard[Policy]:
    """Whether ``value`` is a policy object (a class with ``decide`` is not: it is built first)."""
    return isinstance(value, Policy) and not isinstance(value, type)


def request_difference(recorded: RecordedTurn, asked: RecordedTurn) -> str:
    """How a policy's model call differs from the recorded one (tools, temperature, max_tokens)."""
    parts = [
        f"{name} {getattr(asked.request, name)!r} (recorded {getattr(recorded.request, name)!r})"
        for name in ("tools", "temperature", "max_tokens")
        if getattr(asked.request, name) != getattr(recorded.request, name)
    ]
    return ", ".join(parts)


def decided_without_model(decision: object) -> TurnDecision | PolicyStep:
    """A decision other than a model call, as what it is compared with: the tool calls it makes,
    or the answer it finishes with."""
    if isinstance(decision, PolicyStep):
        return decision
    if isinstance(decision, CallTools):
        return TurnDecision(tool_calls=tuple(ToolCallDecision(c.tool_name, dict(c.arguments)) for c in decision.calls))
    if isinstance(decision, SpawnSubtask):
        return TurnDecision(tool_calls=(ToolCallDecision(decision.agent or "subtask", {"goal": decision.goal}),))
    if isinstance(decision, Finish):
        if decision.status == "failed":
            return PolicyStep(f"fails the goal: {decision.answer}")
        return TurnDecision(answer=decision.answer)
    return PolicyStep(f"the policy returned {type(decision).__name__}, which is not a Decision")


__all__ = ["PolicyJudge", "PolicyStep", "decided_without_model", "is_policy", "request_difference"]
