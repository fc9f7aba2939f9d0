"""`noeta serve`'s request guard over real HTTP: API keys, Host and Origin allow-lists, CORS,
size and media-type limits, health endpoints; a real dev server behind it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError, TaskNotFoundError
from noeta.http import create_app
from noeta.http import serve as serve_http
from noeta.security.http_guard import GuardConfig, key_matches
from tests.support.asgi import serving

KEY = "noeta-key-" + "a1" * 16
OTHER_KEY = "noeta-key-" + "b2" * 16
UI = "https://console.example.com"


@pytest.fixture
async def secured(client: AsyncClient):
    app = create_app(client, guard=GuardConfig(api_keys=(KEY, OTHER_KEY), cors_origins=(UI,)))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield http


async def test_api_key_required(secured: httpx.AsyncClient):
    response = await secured.get("/tasks")
    assert (response.status_code, response.json()["error"]) == (401, "Unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert (await secured.get("/tasks", headers={"authorization": "Bearer " + KEY[:-1] + "x"})).status_code == 401
    assert (await secured.get("/tasks", headers={"authorization": f"Basic {KEY}"})).status_code == 401
    assert (await secured.get("/tasks", headers={"authorization": f"Bearer {KEY}"})).status_code == 200
    assert (await secured.get("/tasks", headers={"x-api-key": OTHER_KEY})).status_code == 200


async def test_foreign_host_and_origin_are_refused(secured: httpx.AsyncClient, client: AsyncClient):
    auth = {"authorization": f"Bearer {KEY}"}
    rebinding = await secured.get("/tasks", headers={**auth, "host": "attacker.example:8080"})
    assert (rebinding.status_code, rebinding.json()["error"]) == (403, "ForbiddenHost")
    assert (await secured.get("/tasks", headers={**auth, "host": "localhost:8080"})).status_code == 200

    # A cross-site form post (text/plain, no preflight) is refused before any handler runs.
    cross_site = await secured.post(
        "/tasks",
        content=b'{"goal": "pwned", "task_id": "csrf-task-1"}',
        headers={**auth, "origin": "https://evil.example", "content-type": "text/plain"},
    )
    assert (cross_site.status_code, cross_site.json()["error"]) == (403, "ForbiddenOrigin")
    plain = await secured.post(
        "/tasks", content=b'{"goal": "pwned", "task_id": "csrf-task-1"}', headers={**auth, "content-type": "text/plain"}
    )
    assert plain.status_code == 415
    with pytest.raises(TaskNotFoundError):
        await client.result("csrf-task-1")

    # The allowed UI origin: preflight answered, responses carry the CORS header.
    preflight = await secured.options(
        "/tasks", headers={"origin": UI, "access-control-request-method": "POST", "access-control-request-headers": "authorization"}
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == UI
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    listed = await secured.get("/tasks", headers={**auth, "origin": UI})
    assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == UI
    assert "access-control-allow-origin" not in (await secured.get("/tasks", headers=auth)).headers
    denied = await secured.options("/tasks", headers={"origin": "https://evil.example", "access-control-request-method": "POST"})
    assert denied.status_code == 403


async def test_health_endpoints_and_limits(secured: httpx.AsyncClient):
    for path in ("/healthz", "/readyz"):
        response = await secured.get(path, headers={"host": "10.1.2.3:8080"})  # a probe by pod IP, no key
        assert response.status_code == 200, path
    assert (await secured.get("/readyz")).json() == {"status": "ready", "temporal": True}

    auth = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    big = await secured.post("/tasks", content=b"x" * (4 * 1024 * 1024 + 1), headers=auth)
    assert (big.status_code, big.json()["error"]) == (413, "PayloadTooLargeError")
    bad = await secured.post("/tasks", content=b'{"goal": ', headers=auth)
    assert bad.status_code == 400 and "Traceback" not in bad.text


async def test_no_key_configured_loopback_only(client: AsyncClient, monkeypatch: pytest.MonkeyPatch):
    """Without keys the API answers local callers, still refuses foreign Host/Origin, and will not
    listen beyond loopback."""
    for name in ("NOETA_API_KEYS", "NOETA_API_KEYS_FILE", "NOETA_ALLOW_UNAUTHENTICATED", "NOETA_ALLOWED_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    async with serving(create_app(client)) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get("/tasks")).status_code == 200
        assert (await http.get("/tasks", headers={"host": "rebound.example"})).status_code == 403
        assert (await http.get("/tasks", headers={"origin": "https://evil.example"})).status_code == 403
        assert (await http.get("/tasks", headers={"origin": base_url})).status_code == 200  # same origin
    with pytest.raises(ConfigurationError, match="without authentication"):
        await serve_http(client, "0.0.0.0", 1)


def test_keys_from_env_and_file(tmp_path: Path):
    path = tmp_path / "keys"
    path.write_text(f"# operators\n{OTHER_KEY}\n")
    config = GuardConfig.from_env(
        env={"NOETA_API_KEYS": KEY, "NOETA_API_KEYS_FILE": str(path), "NOETA_CORS_ORIGINS": f"{UI}/"},
        bind_host="api.internal",
    )
    assert (config.api_keys, config.keys_file) == ((KEY,), path)  # the guard reads the file (and re-reads it)
    assert config.cors_origins == (UI,)
    assert "api.internal" in config.allowed_hosts and "localhost" in config.allowed_hosts
    assert KEY not in repr(config)
    with pytest.raises(ConfigurationError, match="at least 16"):
        GuardConfig.from_env(env={"NOETA_API_KEYS": "short"})
    with pytest.raises(ConfigurationError):
        GuardConfig.from_env(env={"NOETA_API_KEYS_FILE": str(tmp_path / "missing")})
    assert key_matches(KEY, (OTHER_KEY, KEY)) and not key_matches(KEY + "x", (KEY,))
    GuardConfig(api_keys=(KEY,)).check_bind("0.0.0.0")  # keys configured: any bind
    GuardConfig().check_bind("0.0.0.0", allow_unauthenticated=True)
