"""The seed page's examples run verbatim, each in a fresh process on the embedded default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


@pytest.mark.parametrize(
    ("script", "expected"),
    [("seed_tool.py", "word_count low\n"), ("seed_query.py", "42\n1\n")],
)
def test_seed_example_prints_what_the_seed_says(script: str, expected: str, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    env["NOETA_HOME"] = str(tmp_path)  # no configuration: query() starts its own dev server here
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
