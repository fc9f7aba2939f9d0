"""Storing a finished step's output without ever running the step again for it.

A tool that finished has done its work (and its side effects). When the content store cannot take
its output (a full disk, PostgreSQL down, a directory the worker may not write), running the tool
again would repeat the work for nothing: the store would refuse the next output as well. So the
attempt keeps the output and retries only the write, heartbeating while it waits. A store that
cannot be reached (cause ``unreachable``: PostgreSQL stopped, a partition) is waited for: each
failed write is an ``outage`` in the attempt ledger, tried again every few seconds for up to the
task's ``store_outage_wait_seconds`` in all, without using up ``max_retries``. Any other failed
write (the store is full, or refuses the worker) is a ``store`` failure, retried on the step's
backoff and counted against ``max_retries`` on its own (never as a lost worker). Past either
bound the step fails with :class:`~noeta.errors.ContentStoreError`, which names the store and
the cause.

An attempt whose time would run out before its next write hands the output to the worker's
:class:`HeldOutputs` and asks Temporal for a retry after the delay: the next attempt of the step,
on this worker, takes the output back and goes on writing. (A retry that another worker picks up
does not find it there; that worker runs the step again, as after a worker lost between a step's
end and its record.)

While the store fails under a step, the step tells its task (:func:`report_outage`, a signal that
issues no command), which shows the outage in its Current Details until its next step.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from noeta.activities._attempts import AttemptLedger, as_details, error_details
from noeta.activities._heartbeat import attempt_seconds, with_heartbeat
from noeta.activities._errors import to_application_error
from noeta.errors import ContentIntegrityError, ContentMissingError, ContentStoreError, EncryptionKeyError
from noeta.protocols.names import SIGNAL_STORE_OUTAGE
from noeta.security.scrub import scrub

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What one worker keeps at most of outputs waiting for the store; the oldest go first beyond it
#: (their steps then run again when retried).
HELD_LIMIT_BYTES = 256 * 2**20
#: Time kept free at the end of an attempt for handing the output back to Temporal.
HAND_BACK_MARGIN_SECONDS = 1.0
#: Longest a step waits to tell its task about a store outage.
REPORT_TIMEOUT_SECONDS = 5.0


class HeldOutputs:
    """Finished outputs by step key, waiting for the next attempt of their step on this worker.
    Thread-safe; bounded by ``limit_bytes`` (each output's size as its caller measures it)."""

    def __init__(self, limit_bytes: int = HELD_LIMIT_BYTES) -> None:
        """``limit_bytes``: what may be held in all before the oldest outputs are dropped."""
        self._limit = limit_bytes
        self._held: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def keep(self, key: str, output: object, size: int) -> None:
        """Hold ``output`` (about ``size`` bytes) for step ``key``'s next attempt."""
        with self._lock:
            self._pop(key)
            self._held[key] = (output, size)
            self._size += size
            while self._size > self._limit and len(self._held) > 1:
                self._pop(next(iter(self._held)))

    def take(self, key: str) -> object | None:
        """The output held for step ``key`` (no longer held), or None."""
        with self._lock:
            return self._pop(key)

    def _pop(self, key: str) -> object | None:
        found = self._held.pop(key, None)
        if found is None:
            return None
        self._size -= found[1]
        return found[0]


async def report_outage(ledger: AttemptLedger, err: ContentStoreError, what: str) -> None:
    """Tell the step's task that the store fails under it, for its Current Details (a signal: the
    task's commands stay the same). Best effort: a task that cannot be told still retries."""
    text = f"**content store outage** ({err.cause or 'error'}): {what}; attempt {ledger.attempt}: {scrub(str(err))}"
    try:
        info = activity.info()
        if info.workflow_id is None:  # an activity run on its own: no task to tell
            return
        handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        # asyncio.timeout honours the attempt's cancellation; wait_for on Python 3.11 may drop it.
        async with asyncio.timeout(REPORT_TIMEOUT_SECONDS):
            await handle.signal(SIGNAL_STORE_OUTAGE, text)
    except Exception as exc:  # noqa: BLE001 (the report is a courtesy; the retry is what matters)
        logger.debug("could not report the store outage to the task: %s", exc)


async def stored(
    ledger: AttemptLedger,
    write: Callable[[], Awaitable[T]],
    hold: Callable[[], None],
) -> T:
    """``await write()`` until the store takes the output: a ContentStoreError is recorded in
    ``ledger`` and the write retried after a delay (heartbeating meanwhile): an unreachable store's
    within ``store_outage_wait_seconds``, any other's on the step's backoff. Raises the final
    ContentStoreError once the waits or the writes are spent; when the attempt has no time left for the
    next write, calls ``hold()`` (the output waits for the next attempt) and raises a retry."""
    seconds = attempt_seconds()
    deadline = None if seconds is None else ledger.started + seconds
    reported = False
    while True:
        try:
            return await write()
        except ContentStoreError as err:
            if not reported:
                reported = True
                await report_outage(ledger, err, "the step finished; its output waits for the store (the step is not run again)")
            delay = ledger.outage(err) if err.cause == "unreachable" else ledger.store_failed(err)
            if delay is None:
                raise ledger.store_gave_up(err) from err
            if deadline is not None and time.monotonic() + delay + HAND_BACK_MARGIN_SECONDS > deadline:
                hold()
                raise ApplicationError(
                    scrub(str(err)),
                    error_details(err, ledger.earlier),
                    type=type(err).__name__,
                    next_retry_delay=timedelta(seconds=delay),
                ) from err
            await with_heartbeat(asyncio.sleep(delay), as_details(ledger.earlier))


async def read_stored(ledger: AttemptLedger, read: Awaitable[T]) -> T:
    """``await read`` (a step reading stored bodies): a body that is damaged, missing or sealed
    under a key this worker lacks fails the step at once with its own error (another attempt
    would read the same); a store that cannot be reached is waited for (an ``outage``, retried
    within ``store_outage_wait_seconds``); any other store failure is a ``store`` failure, retried."""
    try:
        return await read
    except (ContentIntegrityError, ContentMissingError, EncryptionKeyError) as err:
        raise to_application_error(err, ledger.earlier) from err
    except ContentStoreError as err:
        await report_outage(ledger, err, "the step cannot read what it needs from the store; retrying")
        if err.cause != "unreachable":
            raise ledger.failed(err, "store") from err
        delay = ledger.outage(err)
        if delay is None:
            raise ledger.store_gave_up(err) from err
        raise ApplicationError(
            scrub(str(err)), error_details(err, ledger.earlier), type=type(err).__name__,
            next_retry_delay=timedelta(seconds=delay),
        ) from err
