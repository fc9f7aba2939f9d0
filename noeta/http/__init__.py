"""``noeta serve``: Noeta's JSON + Server-Sent Events HTTP API (needs the ``[serve]`` extra).

API keys (``NOETA_API_KEYS``), Host/Origin checks and CORS: docs/security.md. Endpoints:
docs/http.md.
"""

from __future__ import annotations

try:
    from noeta.http.app import create_app, serve
except ImportError as err:  # pragma: no cover - depends on the installed extras
    if str(err.name or "").partition(".")[0] not in ("fastapi", "starlette", "uvicorn"):
        raise
    raise ImportError("the HTTP API needs the serve extra: pip install 'noeta[serve]'") from err

__all__ = ["create_app", "serve"]
