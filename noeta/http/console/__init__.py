"""The web console: plain HTML, CSS and JavaScript files (no build step) that ``noeta serve``
serves at ``/`` and ``/console/...``, and the API docs page at ``/docs``.

The files hold no data and need no key; everything they show comes from the same HTTP API, with
the API key the user types in (sent as ``Authorization: Bearer``). Pages are same-origin only and
carry a strict Content-Security-Policy: no inline script, no third-party resource.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

#: file name -> media type; nothing else under /console is served.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "docs.html": "text/html; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "docs.js": "text/javascript; charset=utf-8",
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


def read(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()


def _file(name: str) -> Response:
    return Response(read(name), media_type=FILES[name], headers=HEADERS)


async def _page(request: Request) -> Response:
    return _file(PAGES[request.url.path])


async def _asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in FILES:
        return Response(b'{"error": "NotFound", "message": "Not Found"}', 404, media_type="application/json")
    return _file(name)


def routes() -> list[Route]:
    return [Route(path, _page, methods=["GET"]) for path in PAGES] + [
        Route("/console/{name}", _asset, methods=["GET"])
    ]
