"""Deterministic, network-free test doubles, and recorded tasks in tests: ``load_task`` reads an
export (``Client.export``) back, ``replay`` asks recorded turns again under a change and reports the
decisions that changed; evals: ``evaluate`` scores an agent on a dataset of ``Case``s with
``scorers`` into an ``EvalReport`` (docs/evaluating.md). Production code never imports this module."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Any, Callable

from noeta.client.runtime import run_to_end
from noeta.client.export import LoadedTask, load_export
from noeta.client.policy_replay import PolicyStep, is_policy
from noeta.client.replay import ChangedDecision, ReplayChanges, ReplayReport, SkippedTurn, replay_provider, replay_tasks
from noeta.config.import_path import load_object
from noeta.evals import scorers
from noeta.evals.dataset import Case, ExpectedTool, load_dataset
from noeta.evals.evaluate import aevaluate, evaluate
from noeta.evals.report import EvalReport, EvalRow
from noeta.evals.run import EvalRun, ToolCall
from noeta.protocols.scoring import OnlineScoring, Score
from noeta.protocols.messages import LLMProvider, LLMRequest, LLMResponse
from noeta.protocols.policy import Policy
from noeta.protocols.turns import ToolCallDecision, TurnDecision


@dataclass
class FakeLLMProvider:
    """A scripted provider with the seed's three fields.

    ``responses`` are returned in order; once they run out ``complete`` raises IndexError, so a
    runaway test fails loudly instead of looping on the last response. ``responder``, when given,
    answers instead (route by request content when tasks run concurrently: the script position
    depends on call order). ``complete`` is thread-safe; the responder runs outside the lock so a
    deliberately blocking responder does not serialize its own callers.

    It registers as "FakeLLMProvider"; register two under names of their own with
    ``Registry.of(providers={"a": fake_a, "b": fake_b})``. Its spans and metrics name it ``fake``
    (``gen_ai.provider.name``: who serves the calls, not a class name).
    """

    #: ``gen_ai.provider.name`` of its calls (a class attribute: the seed's three fields stay the only ones).
    provider_system: ClassVar[str] = "fake"

    responses: list[LLMResponse] = field(default_factory=list)
    received_requests: list[LLMRequest] = field(default_factory=list)
    responder: Callable[[LLMRequest], LLMResponse] | None = None

    def __post_init__(self) -> None:
        """Set up the lock and the script position that ``complete`` shares between threads."""
        # Plain attributes, not dataclass fields: the seed's dataclass has exactly three fields.
        self._lock = threading.Lock()
        self._position = 0

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Record ``request`` and answer with the next scripted response (or the responder's)."""
        with self._lock:
            self.received_requests.append(request)
            if self.responder is None:
                if self._position >= len(self.responses):
                    raise IndexError(
                        f"FakeLLMProvider script exhausted after {len(self.responses)} response(s)"
                    )
                response = self.responses[self._position]
                self._position += 1
                return response
        return self.responder(request)


def load_task(export: Mapping[str, Any] | str | bytes | Path) -> LoadedTask:
    """A task read back from its export: the dict ``Client.export`` returns, its JSON text, or a
    file holding it (``noeta export TASK > task.json``). ExportFormatError when it is not one."""
    if isinstance(export, Path):
        export = export.read_bytes()
    return load_export(export)


def replay(
    tasks: Iterable[LoadedTask | Mapping[str, Any] | str],
    *,
    options: Any = None,
    provider: LLMProvider | str | None = None,
    policy: Policy | str | None = None,
    client: Any = None,
) -> ReplayReport:
    """Ask every recorded model turn of ``tasks`` again under a change, and report each decision
    that differs from the recorded one (tool names and arguments, or the final answer). No tool
    runs. ``tasks`` are loaded tasks, exports, or task ids (exported through ``client``, a
    ``noeta.sdk.Client``; one connected from the environment when None).

    ``options`` (an ``Options``) changes the model, the system prompt, the temperature or
    max_tokens where it sets them; ``provider`` answers (an object, or the name of a built-in
    provider the environment configures), else ``options.provider``.

    ``policy`` (a Policy, or ``"package.module:Class"``) decides each turn first, from the View
    the workflow had before it (docs/changing-agents.md): its model calls are answered by the
    provider, or without one by the record when the request is the recorded one; its tool calls
    or finish are compared with the turn's decision directly.
    """
    changes = ReplayChanges(
        model=getattr(options, "model", None),
        system_prompt=getattr(options, "system_prompt", None),
        temperature=getattr(options, "temperature", None),
        max_tokens=getattr(options, "max_tokens", None),
    )
    named = provider if provider is not None else getattr(options, "provider", None)
    answering = replay_provider(named, policy, changes, environment_default=False)
    deciding = load_object(policy, is_policy, "Policy", "policy") if isinstance(policy, str) else policy
    items = list(tasks)
    with _exporter(client, any(isinstance(item, str) for item in items)) as exporter:
        loaded = [exporter.export(item) if isinstance(item, str) else item for item in items]
    ready = [item if isinstance(item, LoadedTask) else load_export(item) for item in loaded]
    return run_to_end(replay_tasks(ready, answering, changes, deciding))


@contextlib.contextmanager
def _exporter(client: Any, needed: bool) -> Iterator[Any]:
    """``client``, or (when task ids need exporting and none was given) one client connected from
    the environment for all of them, closed afterwards."""
    if client is not None or not needed:
        yield client
        return
    from noeta.client.sync import Client

    with Client() as own:
        yield own


__all__ = [
    "Case",
    "ChangedDecision",
    "EvalReport",
    "EvalRow",
    "EvalRun",
    "ExpectedTool",
    "FakeLLMProvider",
    "LoadedTask",
    "OnlineScoring",
    "Score",
    "ToolCall",
    "aevaluate",
    "evaluate",
    "load_dataset",
    "scorers",
    "PolicyStep",
    "ReplayReport",
    "SkippedTurn",
    "ToolCallDecision",
    "TurnDecision",
    "load_task",
    "replay",
]
