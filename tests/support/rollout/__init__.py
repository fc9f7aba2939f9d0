"""Two builds of one user policy (``a/rollout_policy.py``, ``b/rollout_policy.py``: the same module
path, changed code) for the Worker Deployment tests: a worker of build X runs with ``X/`` on its
PYTHONPATH, as a container image of that build would have it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
MODULE = "rollout_policy"


def build_path(build: str) -> str:
    """The directory holding build ``build``'s policy module."""
    return str(HERE / build)


def policy_of(build: str) -> Any:
    """An instance of build ``build``'s policy, for Options (the task records only its path)."""
    spec = importlib.util.spec_from_file_location(MODULE, HERE / build / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(MODULE, module)
    spec.loader.exec_module(module)
    return module.TriagePolicy()
