"""MemoryStore: one memory per file, Markdown body with a small frontmatter block.

The host that manages a memory pool opens the same store the agent writes, so both sides agree on
slugs and frontmatter. A file looks like::

    ---
    title: "Preferred deploy window"
    tags: ["ops"]
    ---
    Deploys happen Tuesdays after 14:00 UTC.

Frontmatter values are JSON, one ``key: value`` per line, so any JSON value round-trips.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noeta.context.atomic_files import write_new

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")
#: Frontmatter keys: one ``key: value`` line each, so a key may hold no newline and no ": ".
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def slugify(text: str) -> str:
    """A stable slug: lower-case ASCII words joined by '-' (at most 80 characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].strip("-")
    if not slug:
        raise ValueError(f"cannot make a slug from {text!r}")
    return slug


@dataclass(frozen=True)
class Memory:
    """One memory as stored: its slug (the file name), its Markdown body and its frontmatter fields."""
    slug: str
    body: str
    frontmatter: dict[str, Any] = field(default_factory=dict)


class MemoryStore:
    """The memories in one directory, one ``<slug>.md`` file each; the memory tool and the host open the same
    directory."""
    def __init__(self, root: str | os.PathLike[str]) -> None:
        """``root`` is the directory of the memories; it is created by the first write, not here."""
        self.root = Path(root)  # created by the first write

    @staticmethod
    def check_slug(slug: str) -> str:
        """``slug`` when it is one (lower-case letters, digits, '-'); ValueError otherwise, so a
        name such as ``../x`` never reaches the file system."""
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            raise ValueError(f"invalid memory slug {slug!r} (use slugify())")
        return slug

    def _path(self, slug: str) -> Path:
        return self.root / f"{self.check_slug(slug)}.md"

    def write(self, slug: str, body: str, **frontmatter: Any) -> Memory:
        """Store ``body`` under ``slug`` (replacing what was there) with ``frontmatter`` as JSON values, and
        return it; ValueError for a bad slug or frontmatter key."""
        for key in frontmatter:
            if not _KEY.fullmatch(key):
                raise ValueError(f"invalid frontmatter key {key!r}: use letters, digits, '_', '.' and '-'")
        lines = ["---", *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(frontmatter.items())), "---", body]
        path = self._path(slug)
        self.root.mkdir(parents=True, exist_ok=True)
        write_new(str(path), "\n".join(lines).encode("utf-8"))  # bodies keep their line ends
        return Memory(slug, body, dict(frontmatter))

    def read(self, slug: str) -> Memory:
        """The memory stored under ``slug``; FileNotFoundError when there is none, ValueError for a bad slug.
        """
        with open(self._path(slug), encoding="utf-8", newline="") as f:
            text = f.read()
        # Split on "\n" only: str.splitlines() would also split inside values at U+2028 and kin.
        lines = text.split("\n")
        frontmatter: dict[str, Any] = {}
        if lines[0] != "---" or "---" not in lines[1:]:
            return Memory(slug, text, frontmatter)
        end = lines.index("---", 1)
        for line in lines[1:end]:
            key, _, value = line.partition(": ")
            frontmatter[key] = json.loads(value)
        return Memory(slug, "\n".join(lines[end + 1 :]), frontmatter)

    def list(self) -> list[str]:
        """The slugs of every stored memory, sorted."""
        return sorted(p.stem for p in self.root.glob("*.md"))

    def delete(self, slug: str) -> bool:
        """Delete the memory ``slug``; True if it existed."""
        path = self._path(slug)
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed
