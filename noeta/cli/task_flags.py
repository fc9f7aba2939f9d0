"""What the task flags of ``noeta run``, ``noeta start`` and ``noeta schedule create`` say: the
task's Options, and who acts (the caller identity Temporal records)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from noeta.cli.setting_flags import given_settings
from noeta.client.options import Options
from noeta.protocols.budget import UsageLimits
from noeta.protocols.identity import user_identity


def task_options(args: argparse.Namespace, **extra: Any) -> Options:
    """Options from the flags run and start share (Options checks every value)."""
    limits = {"max_cost_usd": args.max_cost_usd, "max_total_tokens": args.max_total_tokens,
              "max_tool_calls": args.max_tool_calls}
    given = {
        **given_settings(args),
        "limits": UsageLimits(**limits) if any(v is not None for v in limits.values()) else None,
        "guards": list(args.guard) or None,
        "validators": list(args.validator) or None,
        "metadata": dict(args.metadata) or None,
        "output_schema": args.output_schema,
        **extra,
    }
    return Options(**{k: v for k, v in given.items() if v is not None})


def identity_of(args: argparse.Namespace) -> str:
    """Who acts, as Temporal records it: ``--as`` where the command has it, else the OS user."""
    name = getattr(args, "acting_as", None)
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "cli"
    return user_identity(str(name))


__all__ = ["identity_of", "task_options"]
