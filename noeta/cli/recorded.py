"""The CLI commands on tasks' records: ``noeta export TASK`` writes a task's export as JSON,
``noeta replay TASK|FILE...`` asks the recorded model turns again under a change and exits 1 when a
decision changed, ``noeta fork TASK --at-turn N`` starts a new task from one of the task's turns
and ``noeta import FILE`` makes an export a task of this installation (docs/changing-agents.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from noeta.client.client import AsyncClient
from noeta.client.export import LoadedTask, load_export
from noeta.client.imports import import_task
from noeta.client.options import Options
from noeta.client.policy_replay import is_policy
from noeta.client.replay import ReplayChanges, replay_provider, replay_tasks
from noeta.config.import_path import load_object
from noeta.errors import ConfigurationError

EXIT_CHANGED = 1


async def cmd_export(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta export TASK``: the task's history and stored bodies as one JSON document on stdout."""
    json.dump(await client.export(args.task), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


def system_prompt(value: str | None) -> str | None:
    """``--system-prompt``: the text, or ``@FILE`` for a file's text."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text()
    except OSError as err:
        raise ConfigurationError(f"--system-prompt {value}: {err.strerror or err}") from err


async def cmd_fork(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta fork TASK|FILE --at-turn N``: start a fork of the task from its model turn N (decided
    anew with the settings given, the task's recorded ones otherwise) and print the fork's id. A
    FILE is an export (``noeta export``), perhaps of another cluster: its bodies are stored here
    first."""
    options = Options(provider=args.provider, model=args.model, system_prompt=system_prompt(args.system_prompt))
    path = Path(args.task)
    source: str | LoadedTask = load_export(path.read_bytes()) if path.is_file() else args.task
    fork = await client.fork(
        source, at_turn=args.at_turn, options=options, goal=args.goal, task_id=args.task_id, task_queue=args.queue
    )
    print(fork, flush=True)
    return 0


async def cmd_import(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta import FILE [--task-id ID]``: record an export as a task of this installation (see
    :mod:`noeta.client.imports`) and print its id."""
    try:
        data = Path(args.file).read_bytes()
    except OSError as err:
        raise ConfigurationError(f"{args.file}: {err.strerror or err}") from err
    print(await import_task(client.temporal, client.content_store, data, args.task_id), flush=True)
    return 0


async def cmd_replay(args: argparse.Namespace) -> int:
    """``noeta replay TASK|FILE... [--policy module:Class]``: print the table of changed decisions;
    exit 1 when one changed. A FILE is an export (``noeta export``); anything else is a task id,
    exported from the cluster. ``--agent A --under B``: noeta.cli.version_commands."""
    if args.agent is not None:
        from noeta.cli.version_commands import cmd_agent_replay

        return await cmd_agent_replay(args)
    if not args.tasks:
        raise ConfigurationError("name the tasks to replay (TASK|FILE...), or an agent version (--agent A --under B)")
    changes = ReplayChanges(model=args.model, system_prompt=system_prompt(args.system_prompt))
    policy = load_object(args.policy, is_policy, "Policy", "--policy") if args.policy is not None else None
    # With a policy and no change of the request, the record answers its unchanged model calls.
    provider = replay_provider(args.provider, policy, changes, what="--provider")
    tasks: list[LoadedTask] = []
    client: AsyncClient | None = None
    try:
        for item in args.tasks:
            path = Path(item)
            if path.is_file():
                tasks.append(load_export(path.read_bytes()))
                continue
            client = client or await AsyncClient.connect()
            exported: dict[str, Any] = await client.export(item)
            tasks.append(load_export(exported))
    finally:
        if client is not None:
            await client.close()
    report = await replay_tasks(tasks, provider, changes, policy)
    print(report.summary(), flush=True)
    return EXIT_CHANGED if report.changed else 0
