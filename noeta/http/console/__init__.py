"""The web console: plain HTML, CSS and JavaScript files (no build step) that ``noeta serve``
serves at ``/`` and ``/console/...``, and the API docs page at ``/docs``.

The files hold no data and need no key; everything they show comes from the same HTTP API, with
the API key the user types in (sent as ``Authorization: Bearer``). Pages are same-origin only and
carry a strict Content-Security-Policy: no inline script, no third-party resource.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Path
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse, Response

from noeta.http.openapi import answers

#: file name -> media type; nothing else under /console is served.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "docs.html": "text/html; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "docs.js": "text/javascript; charset=utf-8",
    "schedules.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
PAGES = {"/": "index.html", "/docs": "docs.html"}
PUBLIC_PATHS = frozenset({*PAGES, *(f"/console/{name}" for name in FILES)})

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(tags=["console"])


def read(name: str) -> bytes:
    """The bytes of one of the console's files."""
    return resources.files(__name__).joinpath(name).read_bytes()


def _file(name: str) -> Response:
    return Response(read(name), media_type=FILES[name], headers=HEADERS)


@router.get("/", response_class=HTMLResponse, summary="The web console (public)")
async def console_page() -> Response:
    """The console's main page."""
    return _file(PAGES["/"])


@router.get(
    "/docs", response_class=HTMLResponse, summary="This API's documentation, rendered from /openapi.json (public)"
)
async def docs_page() -> Response:
    """The API documentation page, rendered in the browser from /openapi.json."""
    return _file(PAGES["/docs"])


_MEDIA_TYPES: dict[str, dict[str, object]] = {media.split(";")[0]: {} for media in FILES.values()}


@router.get(
    "/console/{name}",
    response_class=Response,
    summary="A file of the console: its pages, scripts and style sheet (public)",
    responses={200: {"description": "The file", "content": _MEDIA_TYPES}, **answers(404)},
)
async def console_file(name: Annotated[str, Path(description=", ".join(FILES))]) -> Response:
    """One of the console's files (404 for any other name)."""
    if name not in FILES:
        raise HTTPException(404)
    return _file(name)
