"""The memory tool: the agent writes, updates, deletes, lists and recalls memories kept in a
:class:`MemoryStore`, the same store a host opens to seed or read the pool.

A task opts in by naming it: ``Options(allowed_tools=["memory"])``. Its worker finds the store in
its resources under ``MEMORY_RESOURCE`` (``noeta worker`` and ``query()`` put one there, under
``NOETA_MEMORY_DIR``). What ``recall`` finds is not the tool's output: the engine adds each
recalled memory to the transcript as a message of origin "memory" (an ``InjectedMessage`` in
``as_messages``), so the model and the reader can tell remembered context from the user's words.

Names are slugs (``deploy-window``): anything else, a path such as ``../x`` included, is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from collections.abc import Mapping
from typing import Any, Protocol

from noeta.builtins.memory.impl import Memory, MemoryStore, slugify
from noeta.protocols.names import MEMORY_RESOURCE
from noeta.protocols.tool import Tool, ToolContext, ToolResult
from noeta.protocols.tool_decorator import tool

#: At most this many memories come back from one recall, each cut to MAX_RECALLED_CHARS.
MAX_RECALLED = 5
MAX_RECALLED_CHARS = 8_000
MAX_CONTENT_CHARS = 64_000
COMMANDS = ("write", "update", "delete", "list", "recall")
_WORD = re.compile(r"[a-z0-9]{2,}")


@dataclass(frozen=True)
class RecallResult(ToolResult):
    """What ``recall`` returns: a ToolResult plus the memories the engine adds to the transcript.
    Only the built-in memory tool's results are honoured (a forged one is an ordinary result)."""

    memories: list[str] = field(default_factory=list)

    def plain(self) -> ToolResult:
        """The same result as a plain ToolResult, without the recalled memories."""
        return ToolResult(**{f.name: getattr(self, f.name) for f in fields(ToolResult)})


def _refused(text: str) -> ToolResult:
    return ToolResult(success=False, output=text)


def _name(arguments: dict[str, Any]) -> str:
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("this command needs a name")
    try:
        MemoryStore.check_slug(name)
    except ValueError:
        try:
            hint = f" (e.g. {slugify(name)!r})"
        except ValueError:
            hint = ""
        raise ValueError(
            f"invalid memory name {name!r}: use lower-case letters, digits and '-', at most 80 characters{hint}"
        ) from None
    return name


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _recalled_text(memory: Memory) -> str:
    title = memory.frontmatter.get("title")
    tags = memory.frontmatter.get("tags")
    head = f"Memory {memory.slug!r}" + (f" ({title})" if isinstance(title, str) and title else "")
    if isinstance(tags, list) and tags:
        head += f" [tags: {', '.join(str(t) for t in tags)}]"
    body = memory.body if len(memory.body) <= MAX_RECALLED_CHARS else memory.body[:MAX_RECALLED_CHARS] + " [cut]"
    return f"{head}:\n{body}"


def recall(store: MemoryStore, query: str, limit: int = MAX_RECALLED) -> list[Memory]:
    """The memories sharing the most words with ``query`` (slug, title, tags and body count)."""
    wanted = _words(query)
    scored = []
    for slug in store.list():
        memory = store.read(slug)
        about = " ".join([slug.replace("-", " "), str(memory.frontmatter.get("title", "")),
                          " ".join(map(str, memory.frontmatter.get("tags") or [])), memory.body])
        score = len(wanted & _words(about))
        if score:
            scored.append((-score, slug, memory))
    return [memory for _, _, memory in sorted(scored, key=lambda s: s[:2])[:limit]]


@tool(
    name="memory",
    version="1",
    input_schema={
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": list(COMMANDS)},
            "name": {"type": "string", "description": "the memory's slug: lower-case letters, digits and '-'"},
            "content": {"type": "string", "description": "write/update: the text to remember"},
            "title": {"type": "string", "description": "write/update: a short title"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "query": {"type": "string", "description": "recall: words to look for (or give a name)"},
        },
        "required": ["command"],
    },
    description=(
        "Long-term memory shared across tasks. write (name, content, title?, tags?) a new memory; "
        "update (name, content?, title?, tags?) one; delete (name); list all; recall (query or name): "
        "the memories found are given to you as context."
    ),
    risk_level="medium",
    timeout_seconds=30,
)
def memory_tool(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Run one memory command (list, recall, write, update, delete); a refusal (bad name, missing memory, no
    store) is a failed result the model reads, never an exception."""
    store = ctx.resources.get(MEMORY_RESOURCE)
    if not isinstance(store, MemoryStore):
        return _refused(f"this worker has no memory store (resources[{MEMORY_RESOURCE!r}])")
    command = arguments.get("command")
    try:
        if command == "list":
            slugs = store.list()
            lines = [f"{s}: {store.read(s).frontmatter.get('title', '')}".rstrip(": ") for s in slugs]
            listing = "\n".join(lines) or "No memories yet."
            return ToolResult(success=True, output=listing, summary=f"{len(slugs)} memories")
        if command == "recall":
            query = arguments.get("query")
            if isinstance(query, str) and query.strip():
                found = recall(store, query)
            else:
                name = _name(arguments)
                found = [store.read(name)] if name in store.list() else []
            names = ", ".join(m.slug for m in found)
            told = f"Recalled {len(found)} memories: {names} (given as context)." if found else "No memory matches."
            return RecallResult(
                success=True,
                output=told,
                summary=f"recalled {names or 'nothing'}",
                memories=[_recalled_text(m) for m in found],
            )
        name = _name(arguments)
        exists = name in store.list()
        if command == "delete":
            if not store.delete(name):
                return _refused(f"no memory named {name!r}")
            return ToolResult(success=True, output=f"Deleted {name!r}.", side_effects=[f"deleted memory {name}"])
        if command not in ("write", "update"):
            return _refused(f"command must be one of {', '.join(COMMANDS)}")
        if command == "write" and exists:
            return _refused(f"a memory named {name!r} exists; use update to change it")
        if command == "update" and not exists:
            return _refused(f"no memory named {name!r}; use write to create it")
        old = store.read(name) if exists else Memory(name, "")
        content = arguments.get("content", old.body)
        if not isinstance(content, str) or (command == "write" and not content.strip()):
            return _refused("content must be a non-empty string")
        if len(content) > MAX_CONTENT_CHARS:
            return _refused(f"content is longer than {MAX_CONTENT_CHARS} characters")
        frontmatter = dict(old.frontmatter)
        for key in ("title", "tags"):
            if key in arguments:
                frontmatter[key] = arguments[key]
        store.write(name, content, **frontmatter)
        verb = "Remembered" if command == "write" else "Updated"
        return ToolResult(success=True, output=f"{verb} {name!r}.", side_effects=[f"{command} memory {name}"])
    except ValueError as err:
        return _refused(str(err))


class ToolRegistry(Protocol):
    """What :func:`add_memory` needs of a worker's registry (:class:`noeta.worker.Registry` is one;
    the registry belongs to a higher layer, so it is described here, not imported)."""

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The registry's tools by name."""

    @property
    def resources(self) -> dict[str, Any]:
        """The registry's resources by key (the memory store goes under ``MEMORY_RESOURCE``)."""

    def add_tool(self, tool: Tool) -> None:
        """Register ``tool`` with the registry."""


def add_memory(registry: ToolRegistry, store: MemoryStore) -> None:
    """Serve the built-in memory tool from ``registry``, with ``store`` as its pool unless the
    registry has one already (a host passes its own: ``Settings.memory_store()``)."""
    if memory_tool.name not in registry.tools:
        registry.add_tool(memory_tool)
    registry.resources.setdefault(MEMORY_RESOURCE, store)


__all__ = ["MAX_RECALLED", "RecallResult", "ToolRegistry", "add_memory", "memory_tool", "recall"]
