"""What a model call cost: its Usage priced by the worker's price table.

The table is the worker's own prices (``Registry(prices=...)``, ``HostConfig(prices=...)`` or the
``NOETA_PRICES`` variable: a JSON object or the path of a JSON file) over the catalogue that the
``genai-prices`` package ships. The catalogue is the data bundled with the installed package: it
is never updated over the network here (its optional background updater is not started), so a
price is the same on every worker with the same package version. docs/budgets.md.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from noeta.config.settings import EnvSettings, blank_as_none
from noeta.errors import ConfigurationError
from noeta.protocols.messages import Usage

logger = logging.getLogger(__name__)

#: The environment variable with a worker's own prices (JSON, or a path to a JSON file).
PRICES_VARIABLE = "NOETA_PRICES"

#: API hosts whose provider the catalogue knows; other base URLs (proxies, local servers) are
#: priced by model name alone.
_KNOWN_HOSTS = {"api.anthropic.com": "anthropic", "api.openai.com": "openai"}


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens. Cache prices default to the input price."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def __post_init__(self) -> None:
        """ConfigurationError unless every price is a finite number >= 0 (cache prices may be None).
        """
        for name in ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or not math.isfinite(value):
                raise ConfigurationError(f"{name} must be a number >= 0, got {value!r}")

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at these prices, in US dollars."""
        read = self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        write = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (
            usage.uncached * self.input_per_mtok
            + usage.cache_read * read
            + usage.cache_write * write
            + usage.output * self.output_per_mtok
        ) / 1_000_000


@dataclass(frozen=True)
class Price:
    """A call's cost and where its price came from."""

    usd: float
    source: str
    """``prices:<model>`` (the worker's own table) or ``genai-prices:<provider>/<model>``."""


@dataclass(frozen=True)
class PriceTable:
    """The worker's own prices by model name (they win), then the genai-prices catalogue."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)
    catalogue: bool = True
    """Look models up in the bundled genai-prices data when the table has no entry."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PriceTable:
        """The table with the prices of ``NOETA_PRICES`` (JSON, or a JSON file's path), if set."""
        return cls(models=dict(PriceSettings.from_env(environ).prices))

    def with_models(self, models: Mapping[str, ModelPrice]) -> PriceTable:
        """A copy with ``models`` added (they win over the table's own entries)."""
        return PriceTable({**self.models, **models}, self.catalogue)

    def price(self, usage: Usage, model: str | None, provider: Any = None) -> Price | None:
        """What ``usage`` of ``model`` cost, or None when no price is known. Never raises: a
        pricing problem must not fail a model call that already happened."""
        if not model:
            return None
        own = self.models.get(model)
        if own is not None:
            return Price(own.cost(usage), f"prices:{model}")
        if not self.catalogue:
            return None
        try:
            return _catalogue_price(usage, model, _provider_hint(provider))
        except Exception:  # a broken catalogue entry: log it, record the call unpriced
            logger.exception("pricing %s with genai-prices failed", model)
            return None

    def has_price(self, model: str | None, provider: Any = None) -> bool:
        """Whether ``model`` has a price, in the table or the catalogue."""
        return self.price(Usage(uncached=1), model, provider) is not None


class PriceSettings(EnvSettings):
    """The worker's own prices from ``NOETA_PRICES`` (empty or blank: none)."""

    prices: Mapping[str, ModelPrice] = Field(default_factory=dict, validation_alias=PRICES_VARIABLE)

    @field_validator("prices", mode="before")
    @classmethod
    def _parse(cls, raw: Any) -> Any:
        raw = blank_as_none(raw)
        if raw is None:
            return {}
        return parse_prices(raw) if isinstance(raw, str) else raw


def parse_prices(raw: str) -> dict[str, ModelPrice]:
    """``{"model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0, ...}}`` from JSON text or a file."""
    text = raw
    if not raw.lstrip().startswith("{"):
        try:
            text = Path(raw).expanduser().read_text()
        except OSError as err:
            raise ConfigurationError(f"{PRICES_VARIABLE}: cannot read {raw!r} ({err.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ConfigurationError(f"{PRICES_VARIABLE} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{PRICES_VARIABLE} must be a JSON object of model name -> prices")
    prices = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{PRICES_VARIABLE}[{model!r}] must be an object of per-million-token prices")
        try:
            prices[model] = ModelPrice(**entry)
        except TypeError as err:
            raise ConfigurationError(f"{PRICES_VARIABLE}[{model!r}]: {err}") from None
    return prices


def _provider_hint(provider: Any) -> str | None:
    base_url = getattr(provider, "base_url", None)
    if not isinstance(base_url, str):
        return None
    host = base_url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return _KNOWN_HOSTS.get(host)


def _catalogue_price(usage: Usage, model: str, provider_id: str | None) -> Price | None:
    # Imported on first use: the catalogue takes most of a second to load, and most tasks in a
    # test run (scripted providers without a model) never need it.
    import genai_prices

    counted = genai_prices.Usage(
        input_tokens=usage.input,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        output_tokens=usage.output,
    )
    for hint in dict.fromkeys([provider_id, None]):
        try:
            calc = genai_prices.calc_price(counted, model, provider_id=hint)
        except LookupError:
            continue
        return Price(float(calc.total_price), f"genai-prices:{calc.provider.id}/{calc.model.id}")
    return None


def model_of(model: str | None, provider: Any) -> str | None:
    """The model a call used: the task's, else the provider's default."""
    if model:
        return model
    default = getattr(provider, "model", None)
    return default if isinstance(default, str) and default else None
