"""Worker tuning an operator can set: concurrency, workflow cache, thread pools, transcript cache,
sticky-queue timeout.

========================================  =========  ==============================================================
variable (``noeta worker`` flag)          default    meaning
========================================  =========  ==============================================================
``NOETA_MAX_WORKFLOW_TASKS``              100        workflow tasks (decide steps) processed at once
(``--max-workflow-tasks``)
``NOETA_MAX_ACTIVITIES``                  100        activities (model calls, tool calls, ...) running at once
(``--max-activities``)
``NOETA_MAX_CACHED_WORKFLOWS``            1000       tasks kept in memory between steps; past it, a task's next
(``--max-cached-workflows``)                         step replays its history first
``NOETA_SYNC_TOOL_THREADS``               32         threads for synchronous tools, guards and validators; a
(``--sync-tool-threads``)                            hung sync tool holds one of these, never the content-store I/O
``NOETA_IO_THREADS``                      8          threads for content-store reads and writes
(``--io-threads``)
``NOETA_TRANSCRIPT_CACHE_MB``             64         transcripts kept decoded between a task's model calls, in MB
(``--transcript-cache-mb``)                          of their stored (JSON) size (decoded, 1-2x that in memory); a
                                                     task whose transcript is not kept has it read back from the
                                                     content store at its next call
``NOETA_STICKY_QUEUE_TIMEOUT_SECONDS``    5          seconds a task's next step waits on the queue of the worker
(``--sticky-queue-timeout-seconds``)                 that ran its last step before any worker may take it
                                                     (Temporal's sticky queue)
========================================  =========  ==============================================================

The concurrency defaults were chosen from ``bench/concurrency.py`` on a 2-core machine
(bench/RESULTS.md): the worker's CPU, not these limits, bounds throughput there; raise them on
bigger hosts.

The sticky-queue timeout trades recovery for replay. A worker caches each task between steps and
polls a queue of its own for their next steps; when it dies (SIGKILL, OOM, a lost node) those
steps wait out this timeout before another worker takes them. When it is merely slow to pick one
up, the step moves on and the worker that takes it replays the task's history first. A live worker
picks a step up within milliseconds (tens of them while busy, on a 2-core machine), so 5 s keeps a
wide margin for that while halving temporalio's 10 s wait after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError


@dataclass(frozen=True)
class Setting:
    variable: str
    default: int
    largest: int
    help: str
    unit: str = "N"
    """The flag's metavar: N a count, S seconds, MB megabytes."""


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
    "transcript_cache_mb": Setting(
        "NOETA_TRANSCRIPT_CACHE_MB", 64, 1_048_576,
        "megabytes of transcripts kept decoded between a task's model calls, counted at their stored size",
        unit="MB",
    ),
    "sticky_queue_timeout_seconds": Setting(
        "NOETA_STICKY_QUEUE_TIMEOUT_SECONDS", 5, 600,
        "seconds a task's next step waits for the worker that ran the last one (a dead worker's tasks wait this long)",
        unit="S",
    ),
}


def _setting(name: str) -> Any:
    # The field's default and variable are its SETTINGS entry's, which the worker's flags use too.
    return Field(default=SETTINGS[name].default, validation_alias=SETTINGS[name].variable)


class WorkerTuning(EnvSettings):
    """How much one worker process takes on at once: keyword arguments, else the variables, else
    the defaults (the table above)."""

    max_workflow_tasks: int = _setting("max_workflow_tasks")
    max_activities: int = _setting("max_activities")
    max_cached_workflows: int = _setting("max_cached_workflows")
    sync_tool_threads: int = _setting("sync_tool_threads")
    io_threads: int = _setting("io_threads")
    transcript_cache_mb: int = _setting("transcript_cache_mb")
    sticky_queue_timeout_seconds: int = _setting("sticky_queue_timeout_seconds")

    @field_validator("*", mode="before")
    @classmethod
    def _whole_number(cls, raw: Any, info: ValidationInfo) -> Any:
        """ConfigurationError unless the value is a whole number from 1 to its setting's largest."""
        name = info.field_name or ""
        setting = SETTINGS[name]
        if isinstance(raw, str):
            try:
                raw = int(raw)
            except ValueError:
                raise ConfigurationError(f"{setting.variable} must be a whole number, got {raw!r}") from None
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= setting.largest:
            raise ConfigurationError(
                f"{name} ({setting.variable}) must be a whole number from 1 to {setting.largest}, got {raw!r}"
            )
        return raw

    def worker_kwargs(self) -> dict[str, Any]:
        """The ``temporalio.worker.Worker`` arguments these settings stand for."""
        return {
            "max_concurrent_workflow_tasks": self.max_workflow_tasks,
            "max_concurrent_activities": self.max_activities,
            "max_cached_workflows": self.max_cached_workflows,
            "sticky_queue_schedule_to_start_timeout": timedelta(seconds=self.sticky_queue_timeout_seconds),
        }


__all__ = ["SETTINGS", "WorkerTuning"]
