"""The registry of the chaos runs' worker processes (``--registry tests.support.chaos_registry:registry``).

Its provider is stateless (any worker gives the same answer): a goal ``"steps=N"`` asks for the
tool ``work`` once per turn, N turns, then answers ``"done N"``; ``"steps=N tool=work_local"`` asks
for the local tool ``work_local`` instead (a short step run as a local activity, for kill loops). The last step of each task waits
for the file ``$NOETA_CHAOS_GATE`` to exist before it does its work, so a run lasts until the
runner has done all its damage. Every model call and every tool
execution appends a line to ``$NOETA_CHAOS_LOG`` (``model <task> <turn> <pid>``, ``start <key>
<pid>``, ``done <key> <pid>``), so a run can count executions per logical call. The tool's side
effect (a file named after ``ctx.idempotency_key`` in ``$NOETA_CHAOS_LOG.effects``, then an ``effect
<key> <pid>`` line) is de-duplicated on that key, as the docs ask of tools with side effects.
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
#: How long one execution of the local tool takes.
LOCAL_WORK_SECONDS = 0.05


def log(line: str) -> None:
    # One write per line in append mode: lines of concurrent processes do not interleave.
    fd = os.open(os.environ["NOETA_CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def steps(request: LLMRequest) -> LLMResponse:
    goal = dict(part.split("=", 1) for part in request.messages[0].text.split())
    wanted = int(goal["steps"])
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock) and b.success)
    log(f"model {request.metadata.get('task_id')} {request.metadata.get('turn')}")
    if done >= wanted:
        return say(f"done {done}")
    return call((f"w{done + 1}", goal.get("tool", "work"), {"i": done + 1, "last": done + 1 == wanted}))


@tool(name="work", version="1",
      input_schema={"type": "object", "properties": {"i": {"type": "integer"}, "last": {"type": "boolean"}}},
      description="A step with a side effect: takes a while, logs its start and end.",
      heartbeat_seconds=1, timeout_seconds=60)
async def work(arguments: dict, ctx: ToolContext) -> ToolResult:
    gate = os.environ.get("NOETA_CHAOS_GATE")
    return await _step(arguments, ctx, WORK_SECONDS, gated=bool(arguments.get("last") and gate))


@tool(name="work_local", version="1", local=True,
      input_schema={"type": "object", "properties": {"i": {"type": "integer"}, "last": {"type": "boolean"}}},
      description="A short step with a side effect, run as a local activity: logs its start and end.",
      timeout_seconds=10)
async def work_local(arguments: dict, ctx: ToolContext) -> ToolResult:
    return await _step(arguments, ctx, LOCAL_WORK_SECONDS, gated=False)


async def _step(arguments: dict, ctx: ToolContext, seconds: float, gated: bool) -> ToolResult:
    log(f"start {ctx.idempotency_key}")
    gate = os.environ.get("NOETA_CHAOS_GATE")
    while gated and gate and not Path(gate).exists():
        await asyncio.sleep(0.1)
    await asyncio.sleep(seconds)
    effects = Path(os.environ["NOETA_CHAOS_LOG"] + ".effects")
    effects.mkdir(exist_ok=True)
    # The side effect, once per key: a file named after the key, holding it, made whole in one step
    # (a hard link fails if the name exists), so a kill at any instant leaves either no effect or
    # one a reader can name. The log line after it is only for ordering.
    staged = effects.with_name(f"{effects.name}.{os.getpid()}.staged")
    staged.write_text(ctx.idempotency_key)
    try:
        os.link(staged, effects / hashlib.sha256(ctx.idempotency_key.encode()).hexdigest())
        log(f"effect {ctx.idempotency_key}")
    except FileExistsError:
        pass
    finally:
        staged.unlink()
    log(f"done {ctx.idempotency_key}")
    return ToolResult(success=True, output=f"step {arguments['i']} done")


registry = Registry.of(tools=[work, work_local], providers={"chaos": FakeLLMProvider(responder=steps)})
