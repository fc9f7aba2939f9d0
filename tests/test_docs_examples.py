"""The examples of docs/resources.md and docs/subagents.md run as written, each in a fresh process
against the test session's dev server (and real PostgreSQL and Redis); each prints what the text
block after it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.postgres import require_postgres
from tests.support.resources import require_redis

DOCS = Path(__file__).resolve().parents[1] / "docs"
_EXAMPLE = re.compile(r"```python\n(.*?)```\n\n```text\n(.*?)```", re.DOTALL)


def examples(name: str) -> list[tuple[str, str, str]]:
    found = _EXAMPLE.findall((DOCS / name).read_text())
    return [(f"{name}#{i}", code, expected) for i, (code, expected) in enumerate(found, start=1)]


EXAMPLES = examples("resources.md") + examples("subagents.md")


def test_every_python_block_of_these_docs_is_an_example_with_its_output():
    for name in ("resources.md", "subagents.md"):
        assert (DOCS / name).read_text().count("```python") == len(examples(name))
    assert len(EXAMPLES) == 7


@pytest.mark.parametrize(("where", "code", "expected"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_doc_example_prints_what_the_doc_says(where: str, code: str, expected: str, temporal_server, tmp_path: Path):
    if "psycopg" in code:
        require_postgres()
    if "redis" in code:
        require_redis()
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "NOETA_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected, proc.stderr
