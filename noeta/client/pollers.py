"""No silent waits: while a client waits for a task (a result, a goal's answer), it asks Temporal
whether any worker polls the task's queue, and says so when none does — which queue, and how to
start a worker for it — then keeps waiting.

Temporal's task-queue description lists the workers that polled a queue lately with the time of
each one's last poll. A live worker polls again at least once a minute (a long poll lasts up to
about a minute), so a queue whose latest poll is older than :data:`POLLER_FRESH_SECONDS` (or that
has never been polled) has no worker now. The server remembers a stopped worker for a few minutes,
so a worker that went away is noticed after POLLER_FRESH_SECONDS; a queue no worker ever polled
(the common mistake: no worker started, or started on another queue) is noticed at the first look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from noeta.client.stalls import current_stall, stall_text
from noeta.protocols.events_task import TaskStalled

logger = logging.getLogger("noeta.client")

#: A poll older than this does not count as a live worker.
POLLER_FRESH_SECONDS = 90.0
#: How long a wait goes before its first look at the queue (the notice comes within 15 s).
FIRST_LOOK_SECONDS = 5.0
#: How often a wait looks again after that.
LOOK_EVERY_SECONDS = 30.0
#: A long wait on a task of a served queue describes the task at least every this many looks.
DESCRIBE_EVERY_LOOKS = 16

Say = Callable[[str], None]


#: How long one answer about a queue serves every wait of this process on that queue: a thousand
#: tasks waited on through one client ask the server about their queue once, not a thousand times
#: every LOOK_EVERY_SECONDS (a worker that comes or goes is noticed this much later).
QUEUE_ANSWER_SECONDS = 10.0
#: The answers, per client, held weakly: a kept answer must not keep its client (and through it the
#: Temporal runtime) alive after its owner let go of it — a script whose query() waited long enough
#: to look at the queue once could not stop the runtime at exit.
_answers: weakref.WeakKeyDictionary[TemporalClient, dict[tuple[int, str, str], tuple[float, asyncio.Future[bool]]]] = (
    weakref.WeakKeyDictionary()
)


async def queue_has_worker(temporal: TemporalClient, task_queue: str) -> bool:
    """Whether a worker polled ``task_queue`` for workflow tasks within POLLER_FRESH_SECONDS (an
    answer asked for in this event loop within QUEUE_ANSWER_SECONDS serves again; a failed
    question is not kept)."""
    now, loop = time.monotonic(), asyncio.get_running_loop()
    answers = _answers.setdefault(temporal, {})
    key = (id(loop), temporal.namespace, task_queue)
    kept = answers.get(key)
    # Loop ids are reused once their loops are gone (a synchronous Client's loops come and go): an
    # answer counts only for the very loop that asked for it.
    if kept is None or now - kept[0] >= QUEUE_ANSWER_SECONDS or kept[1].get_loop() is not loop:
        for old in [k for k, (at, _) in answers.items() if now - at >= QUEUE_ANSWER_SECONDS]:
            del answers[old]
        kept = answers[key] = (now, asyncio.ensure_future(_ask_queue(temporal, task_queue)))
    try:
        return await asyncio.shield(kept[1])
    except Exception:
        if answers.get(key) is kept:
            del answers[key]
        raise


async def _ask_queue(temporal: TemporalClient, task_queue: str) -> bool:
    answer = await temporal.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=temporal.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        retry=True,
    )
    now = datetime.now(timezone.utc)
    for poller in answer.pollers:
        last = poller.last_access_time.ToDatetime(tzinfo=timezone.utc)
        if (now - last).total_seconds() <= POLLER_FRESH_SECONDS:
            return True
    return False


def no_worker_message(task_id: str, task_queue: str) -> str:
    """What a wait says when no worker polls the task's queue."""
    return (
        f"task {task_id} is waiting: no worker polls its task queue {task_queue!r}. Start one for it: "
        f"`noeta worker --task-queue {task_queue} --registry MODULE:REGISTRY` (the registry holding the "
        "task's tools and providers; `python -m noeta worker` where the script is not on PATH); still waiting"
    )


async def unpolled_queue(temporal: TemporalClient, task_id: str) -> str | None:
    """The task's queue when the task runs and no worker polls that queue; None otherwise (the
    task has ended, a worker polls, or the server could not say)."""
    return (await look(temporal, task_id, stalls=False)).unpolled_queue


@dataclass(frozen=True)
class Look:
    """What one look at a waited-for task found: the queue nobody polls, or what stalls it."""

    unpolled_queue: str | None = None
    stall: TaskStalled | None = None
    task_queue: str | None = None
    """The queue the running task's description named (None: not described, or not running)."""


async def look(temporal: TemporalClient, task_id: str, *, stalls: bool = True) -> Look:
    """One look at a task, from one description of it: whether its running task's queue has no
    worker, else (``stalls``) whether its workers fail its next step. Empty when the task has
    ended, moves, or the server could not say (the wait itself reports what is wrong)."""
    try:
        description = await temporal.get_workflow_handle(task_id).describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            return Look()
        queue = description.task_queue
        if not await queue_has_worker(temporal, queue):
            return Look(unpolled_queue=queue, task_queue=queue)
        return Look(stall=await current_stall(temporal, task_id, description) if stalls else None, task_queue=queue)
    except RPCError:
        return Look()


async def _served(temporal: TemporalClient, task_queue: str) -> bool:
    """Whether a worker polls ``task_queue`` (False when the server could not say: then the task
    is looked at as without a known queue)."""
    try:
        return await queue_has_worker(temporal, task_queue)
    except RPCError:
        return False


def stalled_message(task_id: str, stall: TaskStalled) -> str:
    """What to tell a user waiting on a task whose next step fails on its workers (a payload key
    they lack...)."""
    return f"task {task_id} is stalled: {stall_text(stall)}; still waiting (it goes on once a worker can run it)"


async def watch(temporal: TemporalClient, task_id: str, say: Say, queue: str | None = None) -> None:
    """Look at the task after FIRST_LOOK_SECONDS, then every LOOK_EVERY_SECONDS; ``say`` the
    no-worker message when nobody polls its queue (again only after a worker has come and gone),
    and the stall message when its workers cannot run its next step (again only after it moved).

    A look asks the server about the task's queue, an answer every wait on that queue shares
    (:func:`queue_has_worker`), and describes the task itself only when it must: when its queue
    is not known yet (``queue``: the one the task was started on, if the caller knows it; else
    the first description names it), when the queue has no worker, and at the 2nd, 4th, 8th, 16th
    look and every 16th after (35 s, 95 s, 215 s, 455 s, then every 8 minutes into the wait),
    which is when a stall is told. So a client waiting on a thousand tasks of a served queue asks
    about the queue once per QUEUE_ANSWER_SECONDS, not about each task every 30 s."""
    said = stalled = False
    await asyncio.sleep(FIRST_LOOK_SECONDS)
    number = 0
    while True:
        number += 1
        if queue is not None and not _describes(number) and await _served(temporal, queue):
            said = False  # its queue is served: nothing to ask about the task itself this time
        else:
            found = await look(temporal, task_id)
            queue = found.task_queue or queue
            if found.unpolled_queue is not None and not said:
                say(no_worker_message(task_id, found.unpolled_queue))
            said = found.unpolled_queue is not None
            if found.stall is not None and not stalled:
                say(stalled_message(task_id, found.stall))
            stalled = found.stall is not None
        await asyncio.sleep(LOOK_EVERY_SECONDS)


def _describes(number: int) -> bool:
    """Whether a wait's look ``number`` (from 1) describes the task even when its queue is served:
    the 2nd, 4th, 8th and then every DESCRIBE_EVERY_LOOKS-th (a stall that begins during a long
    wait is told within about 8 minutes; the event log and Current Details show it at once)."""
    return number >= 2 and (number & (number - 1) == 0 or number % DESCRIBE_EVERY_LOOKS == 0)


@contextlib.asynccontextmanager
async def saying_when_unpolled(
    temporal: TemporalClient, task_id: str, say: Say | None = None, *, queue: str | None = None
) -> AsyncIterator[None]:
    """Around a wait for ``task_id``: the no-worker message (through ``say``, default: a warning
    on the ``noeta.client`` logger) when no worker polls the task's queue (``queue``: the one it
    was started on, when the caller knows it; see :func:`watch`)."""
    watcher = asyncio.ensure_future(watch(temporal, task_id, say or logger.warning, queue))
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


__all__ = [
    "DESCRIBE_EVERY_LOOKS", "FIRST_LOOK_SECONDS", "LOOK_EVERY_SECONDS", "POLLER_FRESH_SECONDS", "QUEUE_ANSWER_SECONDS", "Look", "look", "no_worker_message", "queue_has_worker",
    "saying_when_unpolled", "stalled_message", "unpolled_queue", "watch",
]
