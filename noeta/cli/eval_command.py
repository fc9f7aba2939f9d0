"""``noeta eval DATASET``: run a dataset's cases as real tasks (or score recorded ones), print the
report (or its JSON), compare with a second setup side by side, and exit 1 below ``--min-score``.

What is evaluated is chosen with ``--provider``, ``--model``, ``--system-prompt`` and ``--options``
(an Options object by import path); named, versioned agents are not in Noeta yet, so there is no
``--agent``. Heavy imports wait for the command to run (``noeta --help`` stays fast).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

#: Exit code when a scorer's mean is below ``--min-score``.
EXIT_BELOW = 1
#: Built-in scorers a dataset file can be scored by without arguments.
BUILTIN = ("answer_exact", "answer_contains", "answer_regex", "structured_equal", "tool_trajectory", "guard_outcome")


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    """The ``eval`` command's arguments."""
    cmd.add_argument("dataset", metavar="DATASET", help="a .jsonl or .yaml file of cases (docs/evaluating.md)")
    cmd.add_argument("--provider", help="who answers: anthropic, openai, local, or package.module:attribute")
    cmd.add_argument("--model", help="the model to ask (default: the provider's)")
    cmd.add_argument("--system-prompt", metavar="TEXT", help="the agent's system prompt")
    cmd.add_argument("--options", metavar="package.module:attribute", help="an Options object (tools, prompt, limits...)")
    cmd.add_argument("--scorer", action="append", default=[], metavar="NAME|package.module:attribute",
                     help=f"a scorer (repeatable): {', '.join(BUILTIN)}, or a callable (case, run) -> Score by import "
                          "path (default: answer_contains, structured_equal, tool_trajectory as the cases expect)")
    cmd.add_argument("--compare", metavar="KEY=VALUE,...|REPORT.json",
                     help="a second setup on the same cases, shown side by side: provider=..., model=..., "
                          "system_prompt=..., options=... (the rest as the first), or a report saved with --json")
    cmd.add_argument("--min-score", metavar="X", help="exit 1 when a scorer's mean is below X (0..1), or NAME=X,... per scorer")
    cmd.add_argument("--recorded", nargs="+", metavar="TASK|FILE",
                     help="score these recorded tasks (ids or exports, in the dataset's order) instead of running the cases")
    cmd.add_argument("--concurrency", type=int, default=4, help="cases running at once (default 4)")
    cmd.add_argument("--json", action="store_true", help="print the report as JSON (for CI)")


def _load(path: str, check: Callable[[Any], bool], what: str) -> Any:
    from noeta.config.import_path import load_object

    def fits(value: object) -> TypeGuard[Any]:
        return check(value)

    return load_object(path, fits, what, what)


def _scorer(spec: str) -> Callable[..., Any]:
    from noeta.errors import ConfigurationError
    from noeta.evals import scorers

    if spec in BUILTIN:
        made: Callable[..., Any] = getattr(scorers, spec)()
        return made
    if ":" not in spec:
        raise ConfigurationError(f"--scorer {spec!r}: one of {', '.join(BUILTIN)}, or package.module:attribute")
    found = _load(spec, callable, "--scorer")
    return found() if isinstance(found, type) else found  # type: ignore[no-any-return]


def _setup(provider: str | None, model: str | None, prompt: str | None, options_path: str | None) -> tuple[Any, Any, str]:
    """The Options and provider one side of an eval runs with, and its label."""
    from noeta.client.options import Options
    from noeta.client.replay import ReplayChanges, replay_provider

    options = _load(options_path, lambda o: isinstance(o, Options), "--options") if options_path else Options()
    changes = {k: v for k, v in (("model", model), ("system_prompt", prompt)) if v is not None}
    options = dataclasses.replace(options, **changes) if changes else options
    chosen = replay_provider(provider, None, ReplayChanges(), what="--provider") if provider else None
    label = ", ".join(f"{k} {v}" for k, v in (("provider", provider), ("model", model), ("options", options_path)) if v)
    return options, chosen, label or "default provider"


def _thresholds(raw: str | None) -> dict[str, float] | float | None:
    from noeta.errors import ConfigurationError

    if raw is None:
        return None
    try:
        if "=" not in raw:
            return float(raw)
        return {k.strip(): float(v) for k, v in (part.split("=", 1) for part in raw.split(","))}
    except ValueError:
        raise ConfigurationError(f"--min-score {raw!r}: a number from 0 to 1, or NAME=X,...") from None


async def cmd_eval(args: argparse.Namespace) -> int:
    """Run (or score) the dataset, print the report and the comparison, exit 1 below the threshold."""
    from noeta.errors import ConfigurationError
    from noeta.evals.dataset import load_dataset
    from noeta.evals.evaluate import aevaluate
    from noeta.evals.render import side_by_side, table
    from noeta.evals.report import report_from_dict

    cases = load_dataset(args.dataset)
    specs = args.scorer or [
        name for name, wanted in (
            ("answer_contains", any(c.expected is not None for c in cases)),
            ("structured_equal", any(c.expected_data is not None for c in cases)),
            ("tool_trajectory", any(c.expected_tools for c in cases)),
        ) if wanted
    ]
    if not specs:
        raise ConfigurationError("the cases expect nothing to score by: give --scorer")
    scorer_list = [_scorer(s) for s in specs]
    limits = _thresholds(args.min_score)
    options, provider, label = _setup(args.provider, args.model, args.system_prompt, args.options)
    recorded = [Path(t) if Path(t).is_file() else t for t in args.recorded] if args.recorded else None
    report = await aevaluate(cases, options=options, provider=provider, scorers=scorer_list,
                             concurrency=args.concurrency, recorded=recorded, label=label)
    other = None
    if args.compare:
        if Path(args.compare).is_file():
            other = report_from_dict(json.loads(Path(args.compare).read_text()))
        else:
            spec = dict(part.split("=", 1) for part in args.compare.split(",") if "=" in part)
            unknown = sorted(set(spec) - {"provider", "model", "system_prompt", "options"})
            if unknown or not spec:
                raise ConfigurationError(f"--compare {args.compare!r}: provider=, model=, system_prompt=, options= or a report file")
            o2, p2, l2 = _setup(spec.get("provider", args.provider), spec.get("model", args.model),
                                spec.get("system_prompt", args.system_prompt), spec.get("options", args.options))
            other = await aevaluate(cases, options=o2, provider=p2, scorers=scorer_list, concurrency=args.concurrency, label=l2)
    if args.json:
        out = report.to_dict() if other is None else {"report": report.to_dict(), "compare": other.to_dict()}
        print(json.dumps(out, indent=2), flush=True)
    else:
        print(table(report) if other is None else table(report) + "\n\n" + side_by_side(report, other), flush=True)
    if limits is None:
        return 0
    below = report.below(limits)
    if below:
        import sys

        print("below --min-score: " + ", ".join(f"{s} {m:.2f}" for s, m in below.items()), file=sys.stderr, flush=True)
        return EXIT_BELOW
    return 0
