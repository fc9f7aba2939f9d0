"""The end of a model call never waits on its stream publisher's question "does someone listen?".

A call that lasts over LISTEN_CHECK_SECONDS asks the task's worker (a query) whether a reader
listens. When the call ends at the moment the answer arrives, closing the publisher cancels that
question as it returns. ``asyncio.wait_for`` on Python 3.11 then returned the answer and dropped the
cancellation: the publisher went on asking every second, and the model call waited for it until its
attempt timed out (300 s by default); 1 in about 3 runs of 100 tasks on a loaded machine.

The answer's timing is what matters here and a real worker cannot be made to answer at a chosen
instant, so the publisher is given a handle whose answer the test releases itself; everything else
(the client, the publisher) is real.
"""

from __future__ import annotations

import asyncio

from noeta.client.client import AsyncClient
from noeta.deltas import workflow_stream
from noeta.deltas.workflow_stream import CallPublisher


class AnswerOnCue:
    """A task handle whose listening query returns only when the test gives the answer."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.questions = 0

    async def query(self, name: str, result_type: type) -> float:
        self.questions += 1
        self.asked.set()
        return await self.answer


async def test_closing_while_the_listening_answer_arrives_ends_the_publisher(client: AsyncClient, monkeypatch):
    monkeypatch.setattr(workflow_stream, "LISTEN_CHECK_SECONDS", 0.01)
    publisher = CallPublisher(client.temporal, "task-x", "run-x", "call-1", attempt=1)
    handle = AnswerOnCue()
    publisher._handle = handle  # type: ignore[assignment]
    publisher.start()
    await asyncio.wait_for(handle.asked.wait(), 5)

    handle.answer.set_result(0.0)  # nobody listens; the answer lands in the same loop turn as the close
    await asyncio.wait_for(publisher.aclose(), 5)

    await asyncio.sleep(0.2)  # a publisher still running would ask again within 0.01 s
    assert handle.questions == 1
