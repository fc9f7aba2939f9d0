"""Replay a recorded history under the policy build on this process's PYTHONPATH:

    PYTHONPATH=.:tests/support/rollout/b python -m tests.support.rollout.replay_under HISTORY.json

Prints the replay failure (exit 1) or "replays" (exit 0): what a worker of that build would do
with the task if it picked it up without versioning."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from temporalio.client import WorkflowHistory

from tests.support.replay import replay


def main(path: str) -> int:
    history = WorkflowHistory.from_json("task", Path(path).read_text())
    failure = asyncio.run(replay(history))
    print(f"{type(failure).__name__}: {failure}" if failure else "replays")
    return 1 if failure else 0


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    # Skip the interpreter's finalization: the replayer's runtime thread can still be releasing the
    # GIL then, which aborts the process (seen once in a full run) and hides the exit code.
    os._exit(code)
