"""Spend quotas of ``noeta serve``: what one API key may spend per day, and a cost ceiling for
every task started through the API.

A key's spend is the cost of the tasks it started that UTC day, summed from Temporal's visibility
store (each task carries its key's id in NoetaApiKey and its cost in NoetaCostUSD): there is no
second ledger to keep in step with the tasks. A request that would start or continue a task is
refused with QuotaExceededError (HTTP 429) once the key has spent its quota, and a task it may
start gets what is left of the quota as its cost limit, so it stops before passing it.
docs/budgets.md has the details and their limits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.config.settings import EnvSettings, blank_as_none, csv
from noeta.errors import ConfigurationError, QuotaExceededError
from noeta.protocols.budget import UsageLimits
from noeta.protocols.names import SA_API_KEY, SA_COST_USD, WORKFLOW_TYPES_QUERY
from noeta.temporal.search_attributes import COST_USD

#: Environment variables of ``noeta serve``.
DAILY_VARIABLE = "NOETA_KEY_DAILY_USD"
PER_KEY_VARIABLE = "NOETA_KEY_QUOTAS"
TASK_VARIABLE = "NOETA_TASK_MAX_COST_USD"


def _usd(name: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigurationError(f"{name} must be a number of US dollars >= 0, got {raw!r}")
    return value


class QuotaSettings(EnvSettings):
    """The variables of :class:`SpendQuotas` (empty or blank: unset)."""

    daily_usd: float | None = Field(default=None, validation_alias=DAILY_VARIABLE)
    per_key: Mapping[str, float] = Field(default_factory=dict, validation_alias=PER_KEY_VARIABLE)
    """``<key id>=<usd>,...``"""
    task_max_cost_usd: float | None = Field(default=None, validation_alias=TASK_VARIABLE)

    @field_validator("daily_usd", "task_max_cost_usd", mode="before")
    @classmethod
    def _dollars(cls, raw: Any, info: ValidationInfo) -> Any:
        raw = blank_as_none(raw)
        return None if raw is None else _usd(cls.variable(info.field_name or ""), raw)

    @field_validator("per_key", mode="before")
    @classmethod
    def _per_key(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        per_key: dict[str, float] = {}
        for item in csv(raw):
            key, sep, amount = item.partition("=")
            if not sep or not key.strip():
                raise ConfigurationError(f"{PER_KEY_VARIABLE} entries look like <key id>=<usd>, got {item!r}")
            per_key[key.strip()] = _usd(PER_KEY_VARIABLE, amount.strip())
        return per_key


@dataclass(frozen=True)
class SpendQuotas:
    """The spend quotas of API keys and the cost ceiling of tasks started through the API, from the
    environment (``from_env``)."""
    daily_usd: float | None = None
    """What each API key may spend per UTC day (None: no daily quota)."""
    per_key: Mapping[str, float] = field(default_factory=dict)
    """Daily quotas of particular keys, by key id (``noeta.security.http_guard.key_id``)."""
    task_max_cost_usd: float | None = None
    """The cost limit of every task started through the API (a lower one in the request wins)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SpendQuotas:
        """``NOETA_KEY_DAILY_USD``, ``NOETA_KEY_QUOTAS`` (``<key id>=<usd>,...``) and
        ``NOETA_TASK_MAX_COST_USD``."""
        settings = QuotaSettings.from_env(env)
        return cls(daily_usd=settings.daily_usd, per_key=dict(settings.per_key), task_max_cost_usd=settings.task_max_cost_usd)

    @property
    def active(self) -> bool:
        """Whether any quota or task ceiling is configured."""
        return self.daily_usd is not None or bool(self.per_key) or self.task_max_cost_usd is not None

    def daily_for(self, key_id: str) -> float | None:
        """The daily quota of the key ``key_id`` in US dollars (its own, else the common one), or
        None."""
        return self.per_key.get(key_id, self.daily_usd)

    async def check_cluster(self, client: AsyncClient) -> None:
        """Quotas need the search attributes they are summed from: refuse to serve without them."""
        if self.active and not (await client.has_attribute(SA_COST_USD) and await client.has_attribute(SA_API_KEY)):
            raise ConfigurationError(
                f"spend quotas need the {SA_COST_USD} and {SA_API_KEY} search attributes on the cluster: run "
                "`noeta setup`"
            )

    async def admit(self, client: AsyncClient, key_id: str, now: datetime | None = None) -> float | None:
        """What ``key_id`` may still spend today (None: no daily quota); raises QuotaExceededError
        once it has spent its quota."""
        allowed = self.daily_for(key_id)
        if allowed is None:
            return None
        await self.check_cluster(client)
        day = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).date()
        spent = await spent_on(client, key_id, day.isoformat())
        if spent >= allowed:
            raise QuotaExceededError(
                quota="daily_usd", key_id=key_id, allowed_usd=allowed, spent_usd=spent, day=day.isoformat()
            )
        return allowed - spent

    def cap(self, options: Options, left_today: float | None) -> Options:
        """``options`` with a cost limit no higher than the task ceiling and what is left today."""
        ceilings = [c for c in (self.task_max_cost_usd, left_today) if c is not None]
        if not ceilings:
            return options
        limits = (options.limits or UsageLimits()).capped(max(min(ceilings), 1e-9))
        return dataclasses.replace(options, limits=limits)


async def spent_on(client: AsyncClient, key_id: str, day: str) -> float:
    """The cost of the tasks ``key_id`` started on ``day`` (YYYY-MM-DD, UTC), from visibility."""
    query = f"{WORKFLOW_TYPES_QUERY} AND {SA_API_KEY} = '{key_id}' AND StartTime >= '{day}T00:00:00Z'"
    end = (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat()
    query += f" AND StartTime < '{end}T00:00:00Z'"
    total = 0.0
    async for wf in client.temporal.list_workflows(query):
        total += wf.typed_search_attributes.get(COST_USD) or 0.0
    return total


def seconds_until_tomorrow(now: datetime | None = None) -> int:
    """For a 429's Retry-After: the quota renews at midnight UTC."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    tomorrow = datetime(now.year, now.month, now.day, tzinfo=timezone.utc) + timedelta(days=1)
    return max(1, int((tomorrow - now).total_seconds()))
