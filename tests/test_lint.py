"""Static checks that catch what tests may not reach: undefined names, unused imports (pyflakes
rules via ruff). A NameError in workflow code would otherwise only show up as a task that hangs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_rules_pass():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F", "noeta", "tests", "bench", "worker.py"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
