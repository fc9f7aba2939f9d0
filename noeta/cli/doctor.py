"""``noeta doctor``: what this installation has, one check per line.

Looks, starts nothing: an embedded server that is not running is reported as such (it starts on
first use), the local models are checked by their files, a content store by writing and reading
one small probe (content-addressed, so repeating it changes nothing).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Literal

from noeta.client.config import Settings
from noeta.client.embedded import STATE_FILE, pid_alive, port_open, temporal_binary
from noeta.errors import ConfigurationError, NoetaError

Status = Literal["ok", "missing", "failed"]
PROBE = b"noeta doctor probe\n"


@dataclass(frozen=True)
class Check:
    """One finding of ``noeta doctor``: what was checked, its status and a line of detail."""
    name: str
    status: Status
    """ok; missing: optional and absent (the line says how to add it); failed: broken."""
    detail: str


def _embedded_address(settings: Settings) -> str | None:
    try:
        state = json.loads((settings.home / "temporal" / STATE_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    port = int(state.get("port", 0))
    return f"127.0.0.1:{port}" if pid_alive(int(state.get("pid", 0))) and port_open(port) else None


async def temporal_checks(settings: Settings) -> list[Check]:
    """The server (configured or embedded) and, when it can be reached, the search attributes."""
    from temporalio.client import Client as TemporalClient

    from noeta.client.visibility import registered_search_attributes
    from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES

    address = settings.temporal_address
    if address is None:
        try:
            binary = temporal_binary()
        except NoetaError as err:
            return [Check("temporal", "failed", str(err))]
        address = _embedded_address(settings)
        if address is None:
            return [
                Check("temporal", "ok", f"embedded dev server, not running (starts on first use; {binary})"),
                Check("search attributes", "ok", "the embedded server registers them when it starts"),
            ]
        where = f"embedded dev server at {address}"
    else:
        where = f"{address} (TEMPORAL_ADDRESS)"
    try:
        temporal = await asyncio.wait_for(
            TemporalClient.connect(
                address,
                namespace=settings.namespace,
                api_key=settings.api_key,
                tls=settings.tls or settings.api_key is not None,
            ),
            timeout=10,
        )
    except (RuntimeError, asyncio.TimeoutError) as err:
        return [Check("temporal", "failed", f"{where} unreachable: {str(err) or type(err).__name__}")]
    checks = [Check("temporal", "ok", f"{where}, namespace {settings.namespace!r}, reachable")]
    registered = await registered_search_attributes(temporal)
    later = sorted(set(SEARCH_ATTRIBUTES) - registered)
    if set(BASE_SEARCH_ATTRIBUTES) <= registered and not later:
        checks.append(Check("search attributes", "ok", "registered"))
    elif set(BASE_SEARCH_ATTRIBUTES) <= registered:
        checks.append(Check("search attributes", "missing", f"{', '.join(later)} not registered: run `noeta setup`"))
    else:
        checks.append(Check("search attributes", "missing", "not registered: run `noeta setup` (`noeta tasks` works without)"))
    return checks


def local_model_checks() -> list[Check]:
    """Whether the embedded local model (the Needle tool router and the SmolLM2 text model) is
    installed."""
    from noeta.providers import local_text, needle_router

    checks = []
    try:
        needle_router.check_installed()
        folder = needle_router.package_dir()
        size = (folder / needle_router.WEIGHTS_FILE).stat().st_size
        checks.append(Check("tool router", "ok", f"Needle 3 ({size / 1e6:.0f} MB, telemetry forced off) in {folder}"))
    except ConfigurationError as err:
        checks.append(Check("tool router", "missing", str(err)))
    try:
        local_text.check_installed()
        path = local_text.model_path()
        checks.append(Check("text model", "ok", f"{local_text.MODEL_ALIAS} ({path.stat().st_size / 1e6:.0f} MB) on xllamacpp"))
    except ConfigurationError as err:
        checks.append(Check("text model", "missing", str(err)))
    return checks


def provider_checks() -> list[Check]:
    """Which providers the environment configures (names only: keys are never printed)."""
    from noeta.providers.defaults import KNOWN_PROVIDERS, default_provider

    checks = []
    for name in KNOWN_PROVIDERS:
        try:
            provider = default_provider(name)
        except ConfigurationError as err:
            checks.append(Check(f"provider {name}", "missing", str(err)))
            continue
        where = getattr(provider, "base_url", None)
        model = getattr(provider, "model", None)
        detail = "configured" + (f": {where}" if where else "") + (f", model {model}" if model else "")
        checks.append(Check(f"provider {name}", "ok", detail))
    try:
        chosen = default_provider(None)
        checks.append(Check("default provider", "ok", f"{getattr(chosen, 'name', type(chosen).__name__)} (what `noeta run` uses)"))
    except ConfigurationError as err:
        checks.append(Check("default provider", "failed", str(err)))
    return checks


def content_store_check(settings: Settings) -> Check:
    """Store a probe body in the configured content store and read it back."""
    try:
        store = settings.content_store()
        ref = store.put(PROBE)
        if store.get(ref) != PROBE:
            return Check("content store", "failed", f"{store!r} returned other bytes for a probe")
    except Exception as err:  # any backend error is the finding
        return Check("content store", "failed", f"{type(err).__name__}: {err}")
    return Check("content store", "ok", f"{store!r}, writable")


async def diagnose(settings: Settings | None = None) -> list[Check]:
    """Every check of ``noeta doctor``: Temporal, the content store, the local model and the
    providers."""
    settings = settings or Settings()
    checks = await temporal_checks(settings)
    checks.append(await asyncio.to_thread(content_store_check, settings))
    checks += local_model_checks()
    checks += provider_checks()
    return checks


def render(check: Check) -> str:
    """One check as a line: a mark for its status, its name and its detail."""
    mark = {"ok": "ok", "missing": "--", "failed": "!!"}[check.status]
    return f"{mark:<3}{check.name:<20} {check.detail}"
