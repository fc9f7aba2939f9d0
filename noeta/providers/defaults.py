"""Which provider Noeta uses when the caller names none (or names a built-in one).

Resolution for ``None``: ``OPENAI_API_KEY`` set -> OpenAI (or the server at ``OPENAI_BASE_URL``);
only ``OPENAI_BASE_URL`` set -> that key-less OpenAI-compatible server; neither -> the embedded
local model, so a first run works offline without any configuration.
"""

from __future__ import annotations

import os

from noeta.errors import ConfigurationError
from noeta.protocols.messages import LLMProvider
from noeta.providers.local import LocalModelProvider
from noeta.providers.openai import DEFAULT_BASE_URL, OpenAIProvider

KNOWN_PROVIDERS: tuple[str, ...] = ("openai", "local")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _openai_from_env() -> OpenAIProvider | None:
    key, base_url, model = _env("OPENAI_API_KEY"), _env("OPENAI_BASE_URL"), _env("NOETA_MODEL")
    if key:
        return OpenAIProvider(
            base_url=base_url or DEFAULT_BASE_URL, api_key=key, model=model or DEFAULT_OPENAI_MODEL
        )
    if base_url:
        # A key-less compatible server (llama.cpp, vLLM, Ollama...) picks its own default model.
        return OpenAIProvider(base_url=base_url, api_key="", model=model)
    return None


def default_provider(name: str | None = None) -> LLMProvider:
    """The provider called ``name`` (one of :data:`KNOWN_PROVIDERS`), or the environment's default.

    Raises :class:`ConfigurationError` for an unknown name or an unconfigured ``"openai"``.
    """
    if name is None:
        provider = _openai_from_env()
        if provider is not None:
            return provider
        try:
            return LocalModelProvider()
        except ConfigurationError as exc:
            raise ConfigurationError(
                "no provider configured: set OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible "
                f"server) or install the local model ({exc})"
            ) from exc
    key = name.strip().lower()
    if key == "openai":
        provider = _openai_from_env()
        if provider is None:
            raise ConfigurationError(
                "provider 'openai' needs OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server)"
            )
        return provider
    if key == "local":
        return LocalModelProvider()
    raise ConfigurationError(
        f"unknown provider {name!r}; known providers: {', '.join(KNOWN_PROVIDERS)}"
    )
