"""The operator docs render and say each thing once: docs/cli.md's command table is one table (no
paragraph splits it, so every command renders as a row), and docs/inspection.md's search attribute
table names each of Noeta's attributes exactly once."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from noeta.protocols.names import SEARCH_ATTRIBUTES

DOCS = Path(__file__).resolve().parents[1] / "docs"


def tables(text: str) -> list[list[str]]:
    """Each run of consecutive table lines (``|`` first), in order."""
    runs: list[list[str]] = []
    previous_was_row = False
    for line in text.splitlines():
        row = line.lstrip().startswith("|")
        if row and not previous_was_row:
            runs.append([])
        if row:
            runs[-1].append(line)
        previous_was_row = row
    return runs


def test_every_command_of_cli_md_is_in_its_one_table():
    text = (DOCS / "cli.md").read_text()
    with_commands = [t for t in tables(text) if any(row.startswith("| `noeta ") for row in t)]
    assert len(with_commands) == 1, [t[0][:60] for t in with_commands]
    [table] = with_commands
    assert table[0].startswith("| command |") and re.fullmatch(r"\|(-+\|)+", table[1])
    assert any("noeta close" in row for row in table) and any("noeta retention" in row for row in table)


def test_inspection_md_lists_each_search_attribute_once():
    text = (DOCS / "inspection.md").read_text()
    [table] = [t for t in tables(text) if t[0].strip().startswith("| attribute |")]
    named = Counter(name for row in table[2:] for name in re.findall(r"`(Noeta\w+)`", row.split("|")[1]))
    assert {name: n for name, n in named.items() if n > 1} == {}
    assert set(named) == set(SEARCH_ATTRIBUTES)
