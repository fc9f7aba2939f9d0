"""The registry of the chaos runs' worker processes (``--registry tests.support.chaos_registry:registry``).

Its provider is stateless (any worker gives the same answer): a goal ``"steps=N"`` asks for the
tool ``work`` once per turn, N turns, then answers ``"done N"``. The last step of each task waits
for the file ``$NOETA_CHAOS_GATE`` to exist before it does its work, so a run lasts until the
runner has done all its damage. Every model call and every tool
execution appends a line to ``$NOETA_CHAOS_LOG`` (``model <task> <turn> <pid>``, ``start <key>
<pid>``, ``done <key> <pid>``), so a run can count executions per logical call. The tool's side
effect (an ``effect <key> <pid>`` line) is de-duplicated on ``ctx.idempotency_key``, as the docs
ask of tools with side effects.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from tests.support.scripts import call, say

#: How long one tool execution takes (kills land inside it).
WORK_SECONDS = float(os.environ.get("NOETA_CHAOS_WORK_SECONDS", "1.0"))


def log(line: str) -> None:
    # One write per line in append mode: lines of concurrent processes do not interleave.
    fd = os.open(os.environ["NOETA_CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def steps(request: LLMRequest) -> LLMResponse:
    goal = request.messages[0].text
    wanted = int(goal.split("=")[1])
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock) and b.success)
    log(f"model {request.metadata.get('task_id')} {request.metadata.get('turn')}")
    if done >= wanted:
        return say(f"done {done}")
    return call((f"w{done + 1}", "work", {"i": done + 1, "last": done + 1 == wanted}))


@tool(name="work", version="1",
      input_schema={"type": "object", "properties": {"i": {"type": "integer"}, "last": {"type": "boolean"}}},
      description="A step with a side effect: takes a while, logs its start and end.",
      heartbeat_seconds=1, timeout_seconds=60)
async def work(arguments: dict, ctx: ToolContext) -> ToolResult:
    log(f"start {ctx.idempotency_key}")
    gate = os.environ.get("NOETA_CHAOS_GATE")
    while arguments.get("last") and gate and not Path(gate).exists():
        await asyncio.sleep(0.1)
    await asyncio.sleep(WORK_SECONDS)
    marker = Path(os.environ["NOETA_CHAOS_LOG"] + ".effects") / hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()
    marker.parent.mkdir(exist_ok=True)
    try:  # the side effect, once per key: O_EXCL creation is the de-duplication
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        log(f"effect {ctx.idempotency_key}")
    except FileExistsError:
        pass
    log(f"done {ctx.idempotency_key}")
    return ToolResult(success=True, output=f"step {arguments['i']} done")


registry = Registry.of(tools=[work], providers={"chaos": FakeLLMProvider(responder=steps)})
