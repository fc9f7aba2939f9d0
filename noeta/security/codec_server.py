"""``noeta codec-server``: the HTTP codec endpoint the Temporal UI (and ``temporal`` CLI) call to
show encrypted payloads to an authorised operator.

Temporal's codec server protocol: ``POST /encode`` and ``POST /decode`` with a JSON body
``{"payloads": [{"metadata": {"encoding": "<base64>"...}, "data": "<base64>"}]}`` answer the
same shape. Requests pass :class:`~noeta.security.http_guard.RequestGuard`: bearer tokens
(``NOETA_CODEC_TOKENS`` / ``_FILE``, else ``NOETA_API_KEYS``), Host allow-list, and CORS for the
UI's origin (``NOETA_CODEC_CORS_ORIGINS``, e.g. ``http://localhost:8233``).

The Temporal UI cannot send a header of its own to a codec endpoint (it passes only its signed-in
user's access token, once it has SSO), so a token may also come as the endpoint's first path part:
``/<token>/decode`` (:class:`PathToken`). The deploy kit points its UI at
``http://127.0.0.1:8089/$NOETA_CODEC_TOKENS``, so payloads decode on first start. Whoever can open
that UI can read the token in its settings: no more than the UI itself shows them.

With ``expand_refs`` a decoded tool result whose output was moved to the content store
(``output`` preview + ``output_ref``) gets its whole body back in ``output``, so the UI shows the
full tool output (text bodies up to ``EXPAND_LIMIT`` bytes).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

from noeta.errors import ConfigurationError, NoetaError
from noeta.security.http_guard import CodecServerSettings, GuardConfig, RequestGuard, ServerSettings

logger = logging.getLogger(__name__)

EXPAND_LIMIT = 1024 * 1024
DEFAULT_PORT = 8089


class BodyReader(Protocol):
    """Where the codec server reads stored bodies from: a content store
    (:class:`noeta.context.content_store.ContentStore` is one; that layer builds on this one, so it
    is described here, not imported)."""

    def get(self, ref: str, /) -> bytes:
        """The body whose sha256 is ``ref``; a NoetaError (or KeyError) when there is none."""
        ...


def guard_from_env(bind_host: str, env: Mapping[str, str] | None = None) -> GuardConfig:
    """Tokens: ``NOETA_CODEC_TOKENS`` (or ``_FILE``), falling back to ``noeta serve``'s keys with
    the admin role (a tenant's key must not decode every tenant's payloads); CORS:
    ``NOETA_CODEC_CORS_ORIGINS``; hosts: ``NOETA_CODEC_ALLOWED_HOSTS``."""
    config = CodecServerSettings.from_env(env).guard(bind_host)
    if config.api_keys:
        return config
    return GuardConfig(
        api_keys=ServerSettings.from_env(env).admin_credentials(),
        allowed_hosts=config.allowed_hosts,
        cors_origins=config.cors_origins,
        max_body_bytes=config.max_body_bytes,
    )


#: The codec protocol's own paths, which a token in the path may come before.
CODEC_PATHS = ("/encode", "/decode")


class PathToken:
    """ASGI middleware in front of the guard: ``/<token>/decode`` (or ``/encode``) becomes
    ``/decode`` with ``Authorization: Bearer <token>`` unless the request has its own. The path is
    rewritten in place, so the access log never shows the token."""

    def __init__(self, app: Any) -> None:
        """Wraps ``app`` (the guarded codec app)."""
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Move a path token into the header, then call the app."""
        if scope["type"] == "http":
            token, slash, rest = scope["path"].lstrip("/").partition("/")
            if slash and token and f"/{rest}" in CODEC_PATHS:
                scope["path"], scope["raw_path"] = f"/{rest}", f"/{rest}".encode()
                if not any(name.lower() == b"authorization" for name, _ in scope["headers"]):
                    scope["headers"] = [*scope["headers"], (b"authorization", b"Bearer " + token.encode())]
        await self.app(scope, receive, send)


def create_codec_app(
    codec: PayloadCodec, guard: GuardConfig, *, store: BodyReader | None = None, expand_refs: bool = False
) -> Starlette:
    """The codec server app; ``store`` is needed for ``expand_refs``."""
    if expand_refs and store is None:
        raise ConfigurationError("expanding content references needs the content store")

    async def read_payloads(request: Request) -> Payloads | Response:
        body = await request.body()
        if len(body) > guard.max_body_bytes:
            return _error(413, "PayloadTooLargeError", f"request body is over {guard.max_body_bytes} bytes")
        payloads = Payloads()
        try:
            json_format.Parse(body, payloads)
        except (json_format.ParseError, UnicodeDecodeError, ValueError):
            return _error(400, "BadRequest", 'the body must be {"payloads": [...]} in protobuf JSON')
        return payloads

    async def encode(request: Request) -> Response:
        payloads = await read_payloads(request)
        if isinstance(payloads, Response):
            return payloads
        return _payloads_response(await codec.encode(list(payloads.payloads)))

    async def decode(request: Request) -> Response:
        payloads = await read_payloads(request)
        if isinstance(payloads, Response):
            return payloads
        try:
            decoded = await codec.decode(list(payloads.payloads))
        except NoetaError as err:  # e.g. a key this server does not have
            return _error(422, type(err).__name__, str(err))
        if expand_refs and store is not None:
            decoded = [expand_payload(p, store) for p in decoded]
        return _payloads_response(decoded)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route("/encode", encode, methods=["POST"]),
        Route("/decode", decode, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(PathToken), Middleware(RequestGuard, config=guard)])


def _payloads_response(payloads: list[Payload]) -> Response:
    body = json_format.MessageToJson(Payloads(payloads=payloads), indent=None)
    return Response(body, media_type="application/json")


def _error(status: int, name: str, message: str) -> Response:
    return JSONResponse({"error": name, "message": message}, status_code=status)


def expand_payload(payload: Payload, store: BodyReader) -> Payload:
    """A JSON payload with every tool output preview replaced by the stored body."""
    if payload.metadata.get("encoding") != b"json/plain":
        return payload
    try:
        value = json.loads(payload.data)
    except ValueError:
        return payload
    expanded, changed = _expand(value, store)
    if not changed:
        return payload
    return Payload(metadata=dict(payload.metadata), data=json.dumps(expanded, ensure_ascii=False).encode())


def _expand(value: Any, store: BodyReader) -> tuple[Any, bool]:
    if isinstance(value, list):
        items = [_expand(v, store) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if not isinstance(value, dict):
        return value, False
    out, changed = {}, False
    for key, item in value.items():
        out[key], item_changed = _expand(item, store)
        changed |= item_changed
    ref = value.get("output_ref")
    if isinstance(ref, dict) and isinstance(ref.get("hash"), str) and isinstance(value.get("output"), str):
        body = _body_text(ref, store)
        if body is not None:
            out["output"], changed = body, True
    return out, changed


def _body_text(ref: Mapping[str, Any], store: BodyReader) -> str | None:
    size = ref.get("size")
    media_type = str(ref.get("media_type", "text/plain"))
    if not isinstance(size, int) or size > EXPAND_LIMIT or not (media_type.startswith("text/") or "json" in media_type):
        return None
    try:
        return store.get(ref["hash"]).decode("utf-8")
    except (KeyError, ValueError, NoetaError) as err:  # missing body, not text, no key: keep the preview
        logger.warning("codec server: cannot expand %s…: %s", str(ref["hash"])[:12], err)
        return None


async def serve_codec(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    ui_origins: tuple[str, ...] = (),
    expand_refs: bool = False,
    open_store: Callable[[], BodyReader] | None = None,
    log_level: str = "info",
) -> None:
    """Run the codec server with uvicorn until stopped. The codec and keys come from the
    environment (as for workers); ``ui_origins`` are added to ``NOETA_CODEC_CORS_ORIGINS``.
    ``expand_refs`` needs ``open_store``, which opens the content store (the caller knows where
    it is: ``noeta codec-server`` passes its settings' store)."""
    import dataclasses

    import uvicorn

    from noeta.telemetry.logs import handler_installed

    from noeta.security.codec import codec_from_env

    codec = codec_from_env()
    if codec is None:
        raise ConfigurationError(
            "the codec server needs the workers' keys: set NOETA_ENCRYPTION_KEYS (or _FILE) or NOETA_CODEC"
        )
    guard = guard_from_env(host)
    guard = dataclasses.replace(guard, cors_origins=(*guard.cors_origins, *(o.rstrip("/") for o in ui_origins)))
    guard.check_bind(host, allow_unauthenticated=CodecServerSettings().allow_unauthenticated)
    if not guard.api_keys:
        logger.warning("the codec server has no tokens (NOETA_CODEC_TOKENS): any local process can decode payloads")
    store = open_store() if expand_refs and open_store is not None else None  # none: create_codec_app refuses
    app = create_codec_app(codec, guard, store=store, expand_refs=expand_refs)
    # With Noeta's log handler installed (noeta codec-server), uvicorn's lines go through it.
    log_config = None if handler_installed() else uvicorn.config.LOGGING_CONFIG
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, log_config=log_config)).serve()
