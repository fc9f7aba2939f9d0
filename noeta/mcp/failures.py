"""What went wrong talking to a remote MCP server, said in words a user can act on.

The SDK's transports run their requests in task groups, so a refused or unreachable server reaches
the caller as an ``ExceptionGroup`` around the real cause. :func:`explain` finds that cause and
turns it into :class:`McpAuthError` (401/403, an OAuth flow that could not finish) or
:class:`McpServerError` naming the server's alias and URL; no group's text reaches a user.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.client.auth.utils import extract_field_from_www_auth

from noeta.errors import McpAuthError, McpServerError, NoetaError
from noeta.protocols.mcp import McpServerConfig

#: How the SDK words metadata whose issuer is not the one it was discovered as (RFC 8414 section 3.3).
_ISSUER_MISMATCH = re.compile(r"issuer mismatch: (?P<published>\S+) != (?P<expected>\S+)")
#: Causes that say the server could not be reached at all.
_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, OSError)


def leaves(err: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``err`` (itself when it is not a group), outermost group first."""
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            yield from leaves(inner)
    else:
        yield err


def cause_of(err: BaseException) -> BaseException:
    """The most telling exception in ``err``: a Noeta error, an auth or HTTP failure, else the first."""
    found = list(leaves(err))
    for kinds in ((NoetaError,), (OAuthFlowError, OAuthTokenError), (httpx.HTTPStatusError,), (httpx.HTTPError, OSError)):
        for leaf in found:
            if isinstance(leaf, kinds):
                return leaf
    return found[0] if found else err


def issuer_mismatch(where: str, published: str, expected: str) -> str:
    """The words for an authorization server whose metadata names another issuer than the one it was
    discovered as: both issuers, why Noeta stops, and what the operators on either side can do."""
    return (
        f"{where}: its authorization server's metadata names the issuer {published!r}, but it was discovered as "
        f"{expected!r} (the issuer the server's protected-resource metadata names, or its origin); RFC 8414 "
        "section 3.3 forbids using metadata whose issuer differs, so no token was requested. Ask the authorization "
        f"server's operator to publish {expected!r} as its issuer, or the MCP server's operator to name "
        f"{published!r} in its protected-resource metadata ('authorization_servers'); nothing in this worker's "
        "configuration can accept the mismatch"
    )


def _where(alias: str, config: McpServerConfig) -> str:
    return f"MCP server {alias!r} ({config.url})" if config.type == "http" else f"MCP server {alias!r} ({config.command})"


def auth_advice(alias: str, config: McpServerConfig) -> str:
    """What an operator does about a server that refuses this worker's credentials."""
    auth = config.auth
    if auth is None:
        return (
            f"it requires authorization: give mcp_servers[{alias!r}] an 'auth' entry (OAuth, see docs/mcp.md) "
            "or the headers it expects"
        )
    if auth.grant == "authorization_code":
        return f"the login is missing, expired or revoked: run `noeta mcp login {alias} --url {config.url}` again"
    return "check the client's id, secret or key and the scopes it may be granted"


def explain(alias: str, config: McpServerConfig, err: BaseException, doing: str = "") -> NoetaError:
    """``err`` (anything an SDK call raised) as the error a user sees, naming the server."""
    cause = cause_of(err)
    where = _where(alias, config)
    url = config.url or ""
    doing = f" {doing}" if doing else ""
    if isinstance(cause, NoetaError):
        return cause
    mismatch = _ISSUER_MISMATCH.search(str(cause)) if isinstance(cause, OAuthFlowError) else None
    if mismatch is not None:
        return McpAuthError(issuer_mismatch(where, mismatch["published"], mismatch["expected"]), alias=alias, url=url)
    if isinstance(cause, (OAuthFlowError, OAuthTokenError)):
        return McpAuthError(
            f"{where}: authorization failed{doing} ({cause}); {auth_advice(alias, config)}", alias=alias, url=url
        )
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
        if status in (401, 403):
            error = extract_field_from_www_auth(cause.response, "error")
            if status == 403 and error == "insufficient_scope":
                scope = extract_field_from_www_auth(cause.response, "scope") or "?"
                advice = (
                    f"the token lacks a scope this call needs ({scope}); allow the client that scope at the "
                    "authorization server, or list it in the server's auth 'scope'"
                )
            else:
                advice = auth_advice(alias, config)
            return McpAuthError(f"{where} refused the request{doing} (HTTP {status}); {advice}", alias, url, status)
        return McpServerError(f"{where} answered{doing} with HTTP {status}")
    if isinstance(cause, _UNREACHABLE):
        detail = str(cause) or type(cause).__name__
        return McpServerError(f"cannot reach {where}{doing}: {detail}")
    detail = str(cause) or "no detail"
    return McpServerError(f"{where}{doing}: {type(cause).__name__}: {detail}")
