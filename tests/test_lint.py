"""Static checks that catch what tests may not reach: undefined names, unused imports (pyflakes
rules via ruff), likely bugs (flake8-bugbear rules) and public names without a docstring. A
NameError in workflow code would otherwise only show up as a task that hangs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.server
def test_pyflakes_rules_pass():
    proc = _ruff("--select", "F", "noeta", "tests", "bench", "worker.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.server
def test_bugbear_rules_pass_on_the_library():
    proc = _ruff("--select", "F,B", "noeta")
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: The project's limit on a module's length: past it, a module holds more than one idea.
MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "noeta").rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, "split these by idea"


def public_modules() -> list[str]:
    """The library's public modules: neither the file name nor any of its package directories
    starts with ``_`` (a package's ``__init__.py`` counts as the package itself)."""
    found = []
    for path in sorted((ROOT / "noeta").rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if any(part.startswith("_") for part in parts[:-1]):
            continue
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        found.append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.server
def test_public_modules_have_docstrings():
    """Every public module, class, function and method says what it is for (pydocstyle's D1 rules)."""
    modules = public_modules()
    assert "noeta/client/tasks.py" in modules and "noeta/activities/_services.py" not in modules
    proc = _ruff("--select", "D1", *modules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
