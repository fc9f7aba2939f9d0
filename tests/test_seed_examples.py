"""The seed page's examples run verbatim, each in a fresh process on the embedded default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


@pytest.mark.server
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


@pytest.mark.server
def test_readme_code_example_runs(tmp_path: Path):
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    code = readme.split("## In code", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    env["NOETA_HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, *items = proc.stdout.splitlines()
    assert first.startswith("42 completed 0 task-")  # the scripted response reports no usage
    assert items == ["UserMessage(text='What is 6 times 7?')", "AssistantMessage(text='42')", "Result(answer='42', status='completed')"]
