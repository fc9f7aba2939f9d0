"""Replaying recorded histories against today's workflow code (``tests/test_replay.py`` and friends)."""

from __future__ import annotations

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from noeta.worker.plugin import NoetaPlugin
from noeta.workflows import WORKFLOWS


async def replay(history: WorkflowHistory, *workflows: type) -> BaseException | None:
    """The history's replay failure with ``workflows`` (default: both of Noeta's workflow types;
    None when it replays).

    Debug mode turns the deadlock detector off: it fails an activation that holds the thread for
    2 s, which a loaded machine (the suite runs in parallel) can cause while the sandbox first
    imports the workflow's modules. What replay proves is determinism, and that is still checked.
    """
    replayer = Replayer(workflows=list(workflows or WORKFLOWS), plugins=[NoetaPlugin()], debug_mode=True)
    return (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
