"""Which provider Noeta uses when the caller names none (or names a built-in one).

Resolution for ``None``:

1. ``ANTHROPIC_API_KEY`` set -> Anthropic (or the server at ``ANTHROPIC_BASE_URL``);
2. else ``OPENAI_API_KEY`` set -> OpenAI (or the server at ``OPENAI_BASE_URL``);
3. else only ``OPENAI_BASE_URL`` set -> that key-less OpenAI-compatible server;
4. else the embedded local model, so a first run works offline without any configuration.

``NOETA_MODEL`` overrides the model of whichever hosted provider is picked. By name, ``"anthropic"``
also accepts a key-less Messages-compatible server at ``ANTHROPIC_BASE_URL`` alone (llama.cpp,
gateways); it is not picked for ``None`` without a key, so an old ``OPENAI_BASE_URL`` setup keeps
working unchanged.
"""

from __future__ import annotations

from noeta.errors import ConfigurationError
from noeta.protocols.messages import LLMProvider
from noeta.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from noeta.providers.anthropic import AnthropicProvider
from noeta.providers.local import LocalModelProvider
from noeta.providers.openai import DEFAULT_BASE_URL, OpenAIProvider
from noeta.providers.settings import ProviderSettings

KNOWN_PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "local")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


def _anthropic_from_env(env: ProviderSettings, *, keyless: bool) -> AnthropicProvider | None:
    """Anthropic from ``ANTHROPIC_API_KEY``; with ``keyless`` also a key-less server at
    ``ANTHROPIC_BASE_URL``."""
    key, base_url = env.anthropic_api_key, env.anthropic_base_url
    model = env.model or DEFAULT_ANTHROPIC_MODEL
    if key:
        return AnthropicProvider(base_url=base_url or ANTHROPIC_BASE_URL, api_key=key, model=model)
    if base_url and keyless:
        # The Messages API requires a model; a compatible server may ignore it.
        return AnthropicProvider(base_url=base_url, api_key="", model=model)
    return None


def _openai_from_env(env: ProviderSettings) -> OpenAIProvider | None:
    key, base_url, model = env.openai_api_key, env.openai_base_url, env.model
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

    Raises :class:`ConfigurationError` for an unknown name or an unconfigured ``"anthropic"`` /
    ``"openai"``.
    """
    env = ProviderSettings()
    if name is None:
        provider: LLMProvider | None = _anthropic_from_env(env, keyless=False) or _openai_from_env(env)
        if provider is not None:
            return provider
        try:
            return LocalModelProvider()
        except ConfigurationError as exc:
            raise ConfigurationError(
                "no provider configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or "
                "OPENAI_BASE_URL for a compatible server) or install the local model "
                f"({exc})"
            ) from exc
    key = name.strip().lower()
    if key == "anthropic":
        provider = _anthropic_from_env(env, keyless=True)
        if provider is None:
            raise ConfigurationError(
                "provider 'anthropic' needs ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a "
                "compatible server)"
            )
        return provider
    if key == "openai":
        provider = _openai_from_env(env)
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
