"""The hosted providers' variables, read by :mod:`noeta.providers.defaults` (which provider is the
default) and by the providers themselves (their key when none is given).

=========================  ==========================================================
variable                   meaning
=========================  ==========================================================
``ANTHROPIC_API_KEY``      key of the Anthropic Messages API
``ANTHROPIC_BASE_URL``     another Messages-compatible server (default: Anthropic's)
``OPENAI_API_KEY``         key of the OpenAI Chat Completions API
``OPENAI_BASE_URL``        another Chat Completions server (default: OpenAI's)
``NOETA_MODEL``            the model of whichever hosted provider is picked
=========================  ==========================================================

Empty or blank values count as unset.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from noeta.config.settings import EnvSettings, blank_as_none


class ProviderSettings(EnvSettings):
    """The hosted providers' variables (the table above); every field is None when unset."""

    # The providers' own variable names: no NOETA_ prefix.
    model_config = SettingsConfigDict(env_prefix="")

    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    model: str | None = Field(default=None, validation_alias="NOETA_MODEL")

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, raw: Any) -> Any:
        return blank_as_none(raw)


__all__ = ["ProviderSettings"]
