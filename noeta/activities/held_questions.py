"""The worker's side of a held question (noeta.protocols.held_questions): while a remote MCP tool
call's server waits for a person's answer, the call's activity tells its task about the question
and asks it for the answer until the grace period ends.

Best effort by design: whenever the task cannot be told or asked (an older worker runs it, the
cluster is slow), the call stops at the question and the durable path answers it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio import activity

from noeta.activities._heartbeat import attempt_seconds
from noeta.protocols.activity_io import InvokeToolInput
from noeta.protocols.elicitation import ElicitationAnswer
from noeta.protocols.held_questions import HOLD_SHARE_OF_ATTEMPT, HeldAnswer, HeldQuestion
from noeta.protocols.names import QUERY_ELICITATION_ANSWER, UPDATE_ELICITATION_HELD

logger = logging.getLogger(__name__)

#: How often the task is asked for the answer: at first, and at most (the gap grows in between).
FIRST_POLL_SECONDS = 0.25
MAX_POLL_SECONDS = 2.0


class QuestionHolder:
    """Holds the questions of one tool call's server for up to ``inp.elicitation_hold_seconds``
    each, and at most until half the attempt's time is spent."""

    def __init__(self, inp: InvokeToolInput) -> None:
        """``inp``: the call, in the running activity (its task is the activity's workflow)."""
        self._inp = inp
        loop = asyncio.get_running_loop()
        seconds = attempt_seconds()
        self._limit = None if seconds is None else loop.time() + HOLD_SHARE_OF_ATTEMPT * seconds

    @staticmethod
    def wanted(inp: InvokeToolInput) -> bool:
        """Whether this call holds its server's questions (a local activity's workflow task is
        blocked while it runs: nothing could list the question)."""
        info = activity.info()
        return inp.elicitation_hold_seconds > 0 and not info.is_local and info.workflow_id is not None

    async def __call__(self, index: int, request: dict[str, Any]) -> ElicitationAnswer | None:
        """The person's answer to the call's ``index``-th question, if it comes in time (None: stop)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self._inp.elicitation_hold_seconds
        if self._limit is not None:
            until = min(until, self._limit)
        if until <= loop.time():
            return None
        info = activity.info()
        handle = activity.client().get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
        asked = HeldQuestion(self._inp.call_id, self._inp.tool_name, index, request)
        try:
            # asyncio.timeout honours the attempt's cancellation; wait_for on Python 3.11 may drop it.
            async with asyncio.timeout(until - loop.time()):
                await handle.execute_update(UPDATE_ELICITATION_HELD, asked)
        except TimeoutError:
            return None
        except Exception as err:  # noqa: BLE001 (refused: an earlier attempt listed it, or not held; the query says)
            logger.debug("held question %s not listed by this attempt: %s", asked.call_id, err)
        call_id = asked.call_id
        pause = FIRST_POLL_SECONDS
        while True:
            try:
                async with asyncio.timeout(max(1.0, until - loop.time())):
                    reply: HeldAnswer = await handle.query(QUERY_ELICITATION_ANSWER, call_id, result_type=HeldAnswer)
            except Exception as err:  # noqa: BLE001 (the task cannot answer now: the durable path will)
                logger.info("stopping at question %s: the task could not be asked for its answer: %s", call_id, err)
                return None
            if not reply.held or reply.answer is not None:
                return reply.answer
            left = until - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(pause, left))
            pause = min(MAX_POLL_SECONDS, pause * 1.5)


__all__ = ["QuestionHolder"]
