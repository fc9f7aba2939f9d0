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


#: Leaf frames that are a thread waiting, not working (py-spy does not always see them as idle):
#: the event loop's epoll wait and a thread-pool worker blocked on its queue.
IDLE_LEAVES = ("EpollSelector.select (selectors.py)", "_worker (concurrent/futures/thread.py)")


def summarize(raw: str, top: int = 30) -> str:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    total = idle = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f]
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = frames[1:]
        names = [short(f) for f in frames]
        if not names or names[-1] in IDLE_LEAVES:
            idle += count
            continue
        total += count
        own[names[-1]] += count
        for name in set(names):
            inclusive[name] += count
        for name in {n for n in names[1:] if n.startswith("<module> (") and n != "<module> (<string>)"}:  # imports
            modules[name] += count
        for group, markers in GROUPS.items():
            if any(m in f for f in frames for m in markers):
                groups[group] += count
    if total == 0:
        return "no samples"

    def rows(counter: Counter[str], n: int | None = None) -> list[str]:
        return [f"  {100 * c / total:5.1f} %  {name}" for name, c in counter.most_common(n)]

    lines = [
        f"{total} busy samples (percentages are of these; {idle} more samples were threads waiting)",
        "", "By subsystem (a sample counts in every group its stack touches):", *rows(groups),
        "", f"Top {top} by self samples:", *rows(own, top),
        "", f"Top {top} by inclusive samples:", *rows(inclusive, top),
        "", "Module bodies executed while measuring (imports; inclusive):", *rows(modules, 15),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(summarize(f.read(), int(sys.argv[2]) if len(sys.argv) > 2 else 30))
