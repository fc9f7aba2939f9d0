"""A pinned task moves to its deployment's current version at continue-as-new.

A task run by a versioned worker (``noeta worker --deployment D --build-id B``) is pinned to that
version: each of its runs completes on the code that started it, so a changed policy or workflow
never replays its history. A run moves only by continuing as new, and then asks for the target
version (``AUTO_UPGRADE`` on the continue-as-new): any continue-as-new of a versioned task does.

A task idle between goals has no workflow task to notice a new current version, so while idle it
wakes every ``check_seconds`` (a timer) and, when Temporal says its target version changed,
continues as new at once: old versions drain within that bound instead of living as long as the
longest conversation. A task waiting for an approval stays on its version until the approval is
answered and its goal ends (its pending approval cannot travel to the next run): a task that only
waits for approvals drains as people answer them.

Unversioned tasks (``get_current_deployment_version()`` is None: recorded in each workflow task's
completion, so replay sees what the run saw) issue exactly the commands they did before.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.workflow import ContinueAsNewVersioningBehavior

from noeta.protocols.names import PATCH_VERSION_UPGRADE
from noeta.workflows import patches

#: Seconds between an idle versioned task's checks; the worker sets it (NOETA_UPGRADE_CHECK_SECONDS).
#: A timer's duration is not part of the command sequence, so workers may differ in it.
_check_seconds = [60.0]


def set_check_seconds(seconds: float) -> None:
    """The worker's NOETA_UPGRADE_CHECK_SECONDS, for the tasks it runs (process-wide)."""
    _check_seconds[0] = seconds


def versioned() -> bool:
    """Whether this run runs on a versioned worker (pinned to its deployment version)."""
    return workflow.info().get_current_deployment_version() is not None


def target_changed() -> bool:
    """Whether another version than this run's became its target (current, or ramping for it)."""
    return versioned() and workflow.info().is_target_worker_deployment_version_changed()


def on_continue() -> ContinueAsNewVersioningBehavior | None:
    """The versioning of the next run: the target version for a versioned task, as before otherwise."""
    return ContinueAsNewVersioningBehavior.AUTO_UPGRADE if versioned() else None


async def wait_idle(ready: Callable[[], bool]) -> bool:
    """Wait until ``ready()``, or, for a versioned task, until its target version changed; True
    when the task should move to it now.

    Temporal tells a run of a new target only in a workflow task, so a versioned task looks every
    ``check_seconds`` (a timer). It moves only after a full check interval idle in this run: right
    after a version became current the server may still report an older target for a moment, and a
    run that moved on such news would move again at once, run after run.
    """
    if not versioned() or not patches.patched(PATCH_VERSION_UPGRADE):
        await workflow.wait_condition(ready)
        return False
    checked = False
    while not ready():
        try:
            await workflow.wait_condition(
                lambda seen=checked: ready() or (seen and target_changed()),  # type: ignore[misc]
                timeout=timedelta(seconds=_check_seconds[0]),
                timeout_summary="version check",
            )
        except TimeoutError:
            checked = True  # the timer's workflow task brought the target version's news, if any
        if checked and target_changed():
            return True
    return checked and target_changed()
