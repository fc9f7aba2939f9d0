"""What compaction costs a task that never reaches its threshold: its history before and after.

    python bench/compaction_history.py [--before REF] [--turns N]

Runs the same task (N tool turns of 2 KB, model ``gpt-4o``: a 128,000-token window, never
reached) on the code of ``REF`` (default: the commit before compaction was added) and on this
checkout, each in a process of its own with its own dev server, and prints the history of each:
events (all, and without workflow-task events, whose number depends on timing), payload bytes (the
task's own data: inputs, results, memos; local-activity timing left out) and total bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(turns: int) -> dict[str, int]:
    """Run the task on the ``noeta`` found first on the path; its history's figures."""
    sys.path.append(str(ROOT))  # after PYTHONPATH: the noeta under test comes first
    from noeta.client.options import Options
    from noeta.protocols.messages import LLMResponse, TextBlock, ToolUseBlock, Usage
    from noeta.protocols.tool import ToolContext, ToolResult
    from noeta.sdk.tools import tool
    from noeta.worker import Registry, build_worker
    from tests.histories.recording import recording_client
    from tests.support.history_bytes import WORKFLOW_TASK_EVENTS, history_shape

    @tool(name="fetch", version="1", input_schema={"type": "object", "properties": {"i": {"type": "integer"}}},
          description="Fetch chunk i (2 KB).")
    def fetch(arguments: dict, ctx: ToolContext) -> ToolResult:
        return ToolResult(success=True, output=(f"chunk {arguments['i']}: " + "river stone ledger " * 120)[:2048])

    class Scripted:
        name = "scripted"

        def complete(self, request):  # type: ignore[no-untyped-def]
            turn = int(request.metadata.get("turn", 0))
            usage = Usage(uncached=600 * turn, output=12)
            if turn <= turns:
                return LLMResponse("tool_use", [ToolUseBlock(f"f{turn}", "fetch", {"i": turn})], usage)
            return LLMResponse("end_turn", [TextBlock("done")], usage)

    async def run() -> dict[str, int]:
        async with recording_client() as (_, client, store):
            registry = Registry.of(tools=[fetch], providers=[Scripted()], content_store=store)
            options = Options(provider="scripted", model="gpt-4o", allowed_tools=[fetch], max_turns=turns + 1)
            async with build_worker(client.temporal, registry, "bench"):
                await client.start("fetch", options, task_id="bench-compaction", task_queue="bench")
                await client.result("bench-compaction")
            history = await client.temporal.get_workflow_handle("bench-compaction").fetch_history()
        events, _, payload = history_shape(history)
        return {
            "events": len(history.events),
            "command_events": events,
            "workflow_task_events": sum(1 for e in history.events if e.event_type in WORKFLOW_TASK_EVENTS),
            "payload_bytes": payload,
            "total_bytes": sum(e.ByteSize() for e in history.events),
        }

    return asyncio.run(run())


def before_compaction() -> str:
    """The commit before the one that added noeta/protocols/compaction.py."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "noeta/protocols/compaction.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    return f"{added[-1]}^"


def figures(noeta_root: Path, turns: int) -> dict[str, int]:
    env = {**os.environ, "PYTHONPATH": str(noeta_root)}
    out = subprocess.run(
        [sys.executable, __file__, "--measure", "--turns", str(turns)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=None)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--measure", action="store_true")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.turns)))
        return
    ref = args.before or before_compaction()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "before.tar"
        subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), ref, "noeta"], cwd=ROOT, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "before")
        short = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        rows = {f"before ({short})": figures(Path(tmp) / "before", args.turns), "this checkout": figures(ROOT, args.turns)}
    keys = ["events", "command_events", "workflow_task_events", "payload_bytes", "total_bytes"]
    print(f"{args.turns} tool turns below the threshold")
    print("| code | " + " | ".join(keys) + " |")
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[k]:,}" for k in keys) + " |")


if __name__ == "__main__":
    main()
