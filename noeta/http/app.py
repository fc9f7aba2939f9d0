"""The HTTP API behind ``noeta serve``, and the web console it serves.

``create_app(client)`` builds the FastAPI app from the endpoints (:mod:`noeta.http.routes`), the
exception handlers (:mod:`noeta.http.errors`), the OpenAPI configuration (:mod:`noeta.http.openapi`)
and the console's static files (:mod:`noeta.http.console`); ``serve(client, host, port)`` runs it
with uvicorn until the server stops. Every request passes
:class:`noeta.security.http_guard.RequestGuard` (API keys, Host/Origin allow-lists, CORS, body
limits; docs/security.md); the console's files and the API description are public (they hold no
data), everything they fetch needs the same API key as any other client. The API only starts and
reads tasks; workers (``noeta worker``) run them. Endpoints, SSE format and error mapping:
docs/http.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re

import uvicorn
from fastapi import FastAPI
from starlette.middleware import Middleware

from noeta import __version__
from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError
from noeta.http import console, openapi, routes, schedule_routes, tenancy, thread_routes
from noeta.http.agent_routes import agents_router
from noeta.http.elicitation_routes import elicitations
from noeta.http.errors import EXCEPTION_HANDLERS
from noeta.http.quotas import SpendQuotas
from noeta.http.routes import AppState
from noeta.http.sse import KEEPALIVE_SECONDS
from noeta.http.tracing import TraceContext
from noeta.security.http_guard import GuardConfig, RequestGuard, ServerSettings
from noeta.security.scrub import scrub
from noeta.telemetry.logs import handler_installed

logger = logging.getLogger(__name__)


def create_app(
    client: AsyncClient,
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
    guard: GuardConfig | None = None,
    quotas: SpendQuotas | None = None,
    with_console: bool = True,
) -> FastAPI:
    """The HTTP API over ``client`` (see docs/http.md). ``keepalive_seconds``: silence after which
    an SSE stream gets a ``: keep-alive`` comment. ``guard``: authentication and request checks
    (default: from the environment, ``GuardConfig.from_env()``). ``quotas``: spend quotas per API
    key and per task (default: ``SpendQuotas.from_env()``, docs/budgets.md). ``with_console``: serve the web
    console at ``/`` and the API docs at ``/docs``. Streamed model text comes from the tasks'
    workflow streams (through Temporal), or from the broker ``NOETA_DELTA_BROKER`` names."""
    if keepalive_seconds <= 0:
        raise ConfigurationError("keepalive_seconds must be > 0")
    guard = guard or GuardConfig.from_env()
    routers = [
        routes.health, routes.api, thread_routes.threads, schedule_routes.schedules, elicitations, agents_router,
        openapi.router,
    ]
    public = {openapi.OPENAPI_PATH}
    if with_console:
        routers.append(console.router)
        public |= console.PUBLIC_PATHS
    guard = dataclasses.replace(guard, open_paths=guard.open_paths | public)
    app = FastAPI(
        title=openapi.TITLE,
        version=__version__,
        description=openapi.DESCRIPTION,
        # The document is a route of openapi.router and the docs page a console file: FastAPI's
        # own docs pages would load their scripts from a CDN, unreachable from an air-gapped host.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        generate_unique_id_function=openapi.operation_id,
        # A body without Content-Type is read as JSON, as before; the guard refuses other types
        # and cross-site requests, which is what FastAPI's stricter default guards against.
        strict_content_type=False,
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=[Middleware(RequestGuard, config=guard), Middleware(TraceContext)],
    )
    for router in routers:
        app.include_router(router)
    app.state.noeta = AppState(
        client=client, keepalive_seconds=keepalive_seconds, quotas=quotas or SpendQuotas.from_env()
    )
    return app


class QueryRedactor(logging.Filter):
    """Keeps secrets out of the access log: every query-string value of a logged request line is
    replaced by ``[redacted]`` (an API key sent as ``?api_key=...`` is refused, and never
    written down either), and the rest of the line goes through ``scrub``."""

    _VALUE = re.compile(r"([?&][^=&#\s]*=)[^&#\s]*")

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's arguments (uvicorn logs the path with its query as one of them)."""
        if isinstance(record.args, tuple):
            record.args = tuple(
                scrub(self._VALUE.sub(r"\1[redacted]", a)) if isinstance(a, str) else a for a in record.args
            )
        elif isinstance(record.msg, str):
            record.msg = scrub(self._VALUE.sub(r"\1[redacted]", record.msg))
        return True


async def serve(
    client: AsyncClient,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
    log_level: str = "info",
    guard: GuardConfig | None = None,
    quotas: SpendQuotas | None = None,
) -> None:
    """Run the HTTP API with uvicorn; returns when the server stops (Ctrl-C / SIGTERM, or when the
    calling task is cancelled: the server then shuts down before the cancellation propagates).
    Without API keys it only listens on loopback (``NOETA_ALLOW_UNAUTHENTICATED=1`` overrides,
    for a deployment behind an authenticating proxy)."""
    guard = guard or GuardConfig.from_env(bind_host=host)
    guard.check_bind(host, allow_unauthenticated=ServerSettings().allow_unauthenticated)
    if not guard.authenticating:
        logger.warning("noeta serve has no API keys (NOETA_API_KEYS): any local process can use it")
    quotas = quotas or SpendQuotas.from_env()
    await quotas.check_cluster(client)
    await tenancy.check_cluster(client, guard)
    if quotas.active:
        # Key ids (hash prefixes), so an operator can give a key its own quota (NOETA_KEY_QUOTAS).
        logger.info("spend quotas on; API key ids: %s", ", ".join(k.id for k in guard.fixed_keys()) or "anonymous")
    config = uvicorn.Config(
        create_app(client, keepalive_seconds=keepalive_seconds, guard=guard, quotas=quotas),
        host=host,
        port=port,
        log_level=log_level,
        # With Noeta's log handler installed (noeta serve), uvicorn's loggers write through it (JSON
        # with NOETA_LOG_FORMAT=json) instead of through plain-text handlers of their own.
        log_config=None if handler_installed() else uvicorn.config.LOGGING_CONFIG,
        timeout_graceful_shutdown=5,  # open SSE streams would otherwise hold shutdown forever
    )
    access_log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QueryRedactor) for f in access_log.filters):
        access_log.addFilter(QueryRedactor())
    server = uvicorn.Server(config)
    running = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        server.should_exit = True
        await running
        raise
