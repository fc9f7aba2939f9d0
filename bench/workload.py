"""The benchmark's workload, shared by both systems: what a task asks for and what a tool returns.

Pure standard library, so the hand-written loop's workflow module can import it inside the sandbox.
"""

from __future__ import annotations

import re

#: The registry name of the scripted provider and the name of the one tool, on the Noeta side.
PROVIDER_NAME = "bench-scripted"
TOOL_NAME = "bench_output"

_GOAL = re.compile(r"bench task: (\d+) tool steps, (\d+) output bytes")


def goal_for(steps: int, output_bytes: int) -> str:
    """The goal text; the scripted provider reads the task's shape back from it, so every agent is
    independent of every other (no shared script position)."""
    return f"bench task: {steps} tool steps, {output_bytes} output bytes"


def parse_goal(text: str) -> tuple[int, int] | None:
    match = _GOAL.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def tool_output(label: str, size: int) -> str:
    """``size`` bytes of text that differ per call (``label``), so no store can deduplicate them."""
    head = f"{label}\n"
    if size <= len(head):
        return head[:size]
    line = "x" * 63 + "\n"
    body = head + line * ((size - len(head)) // len(line) + 1)
    return body[:size]


def final_answer(steps_done: int) -> str:
    return f"done after {steps_done} tool results"
