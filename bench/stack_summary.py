"""Summarize py-spy's raw (collapsed) stacks: where a process's busy CPU samples went.

    python bench/stack_summary.py PROFILE.raw [TOP]

Each input line is ``frame;frame;...;leaf COUNT`` (py-spy ``--format raw``, busy samples only).
Prints the functions with the most samples on top of the stack (self) and anywhere on it
(inclusive), and the share of samples under a few known subsystems.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<path>[^()]*?)(?::\d+)?\)$")

#: Subsystems worth a line of their own: a stack counts once if any frame matches.
GROUPS = {
    "workflow sandbox imports (sandbox/_importer)": ("temporalio/worker/workflow_sandbox/_importer",),
    "workflow code (noeta/workflows)": ("noeta/workflows/",),
    "activities (noeta/activities)": ("noeta/activities/",),
    "content store / transcript (noeta/context)": ("noeta/context/",),
    "payload conversion (temporalio/converter, contrib/pydantic)": ("temporalio/converter", "temporalio/contrib/pydantic"),
    "pydantic schema building (pydantic/_internal/_generate_schema)": ("pydantic/_internal/_generate_schema",),
    "pydantic TypeAdapter construction": ("pydantic/type_adapter.py",),
    "dataclass creation (dataclasses.py)": ("dataclasses.py",),
    "jsonschema": ("jsonschema/",),
    "hashlib / json": ("hashlib", "json/"),
}


def short(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match.group("path")
    for marker in ("site-packages/", "lib/python3.", "/noeta/", "/bench/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "lib/python3.":
                path = path.split("/", 1)[-1]
            elif marker in ("/noeta/", "/bench/"):
                path = marker.strip("/") + "/" + path
            break
    return f"{match.group('func')} ({path})"


def summarize(raw: str, top: int = 30) -> str:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [f for f in stack.split(";") if f]
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = frames[1:]
        names = [short(f) for f in frames]
        if names:
            own[names[-1]] += count
        for name in set(names):
            inclusive[name] += count
        for group, markers in GROUPS.items():
            if any(m in f for f in frames for m in markers):
                groups[group] += count
    if total == 0:
        return "no samples"
    lines = [f"{total} busy samples", "", "By subsystem (a sample counts in every group its stack touches):"]
    lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in groups.most_common()]
    lines += ["", f"Top {top} by self samples:"]
    lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in own.most_common(top)]
    lines += ["", f"Top {top} by inclusive samples:"]
    lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(summarize(f.read(), int(sys.argv[2]) if len(sys.argv) > 2 else 30))
