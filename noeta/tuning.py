"""Worker tuning an operator can set: concurrency, workflow cache and thread pools.

=================================  =========  ===========================================================
variable (``noeta worker`` flag)   default    meaning
=================================  =========  ===========================================================
``NOETA_MAX_WORKFLOW_TASKS``       100        workflow tasks (decide steps) processed at once
(``--max-workflow-tasks``)
``NOETA_MAX_ACTIVITIES``           100        activities (model calls, tool calls, ...) running at once
(``--max-activities``)
``NOETA_MAX_CACHED_WORKFLOWS``     1000       tasks kept in memory between steps; past it, a task's next
(``--max-cached-workflows``)                  step replays its history first
``NOETA_SYNC_TOOL_THREADS``        32         threads for synchronous tools, guards and validators; a
(``--sync-tool-threads``)                     hung sync tool holds one of these, never the content-store I/O
``NOETA_IO_THREADS``               8          threads for content-store reads and writes
(``--io-threads``)
=================================  =========  ===========================================================

The defaults were chosen from ``bench/concurrency.py`` on a 2-core machine (bench/RESULTS.md): the
worker's CPU, not these limits, bounds throughput there; raise them on bigger hosts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from noeta.errors import ConfigurationError


@dataclass(frozen=True)
class Setting:
    variable: str
    default: int
    largest: int
    help: str


#: One entry per WorkerTuning field.
SETTINGS: dict[str, Setting] = {
    "max_workflow_tasks": Setting("NOETA_MAX_WORKFLOW_TASKS", 100, 10_000, "workflow tasks processed at once"),
    "max_activities": Setting("NOETA_MAX_ACTIVITIES", 100, 10_000, "activities running at once"),
    "max_cached_workflows": Setting(
        "NOETA_MAX_CACHED_WORKFLOWS", 1000, 1_000_000, "tasks kept in memory between steps"
    ),
    "sync_tool_threads": Setting(
        "NOETA_SYNC_TOOL_THREADS", 32, 4096, "threads for synchronous tools, guards and validators"
    ),
    "io_threads": Setting("NOETA_IO_THREADS", 8, 1024, "threads for content-store reads and writes"),
}


def _from_env(name: str) -> Any:
    setting = SETTINGS[name]
    raw = os.environ.get(setting.variable)
    if not raw:
        return setting.default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{setting.variable} must be a whole number, got {raw!r}") from None


@dataclass(frozen=True)
class WorkerTuning:
    """How much one worker process takes on at once. Unset fields come from the environment."""

    max_workflow_tasks: int = field(default_factory=lambda: _from_env("max_workflow_tasks"))
    max_activities: int = field(default_factory=lambda: _from_env("max_activities"))
    max_cached_workflows: int = field(default_factory=lambda: _from_env("max_cached_workflows"))
    sync_tool_threads: int = field(default_factory=lambda: _from_env("sync_tool_threads"))
    io_threads: int = field(default_factory=lambda: _from_env("io_threads"))

    def __post_init__(self) -> None:
        for f in fields(self):
            setting, value = SETTINGS[f.name], getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= setting.largest:
                raise ConfigurationError(
                    f"{f.name} ({setting.variable}) must be a whole number from 1 to {setting.largest}, "
                    f"got {value!r}"
                )

    def worker_kwargs(self) -> dict[str, Any]:
        """The ``temporalio.worker.Worker`` arguments these settings stand for."""
        return {
            "max_concurrent_workflow_tasks": self.max_workflow_tasks,
            "max_concurrent_activities": self.max_activities,
            "max_cached_workflows": self.max_cached_workflows,
        }


__all__ = ["SETTINGS", "WorkerTuning"]
