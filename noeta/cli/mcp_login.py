"""``noeta mcp login ALIAS --url URL``: a user's one-time login to a remote MCP server
(authorization code with PKCE, the browser on this machine), its tokens stored where the workers
read them (``NOETA_MCP_TOKENS_DIR``, sealed with ``NOETA_ENCRYPTION_KEYS``; docs/mcp.md)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from noeta.errors import ConfigurationError, NoetaError
from noeta.mcp.config import parse_server, resolve


def server_entry(args: argparse.Namespace) -> dict[str, Any]:
    """The ``mcp_servers`` entry the login is for: the same URL and client as the tasks' entry."""
    auth: dict[str, Any] = {"grant": "authorization_code"}
    if args.client_id:
        auth["client_id"] = args.client_id
    if args.client_secret_env:
        auth["client_secret"] = "${" + args.client_secret_env + "}"
    if args.scope:
        auth["scope"] = args.scope
    return {"type": "http", "url": args.url, "auth": auth}


async def cmd_mcp(args: argparse.Namespace) -> int:
    """Log in; prints the server's tools. Exit code 1 with the reason when the login fails."""
    try:
        config = parse_server(args.alias, server_entry(args))
        if args.client_secret_env and args.client_secret_env not in os.environ:
            raise ConfigurationError(f"{args.client_secret_env} is not set in this environment")
        try:  # the mcp SDK: the noeta[mcp] extra
            from noeta.mcp.login import login
            from noeta.mcp.tokens import McpTokenStore
        except ImportError as err:
            raise ConfigurationError("noeta mcp login needs the mcp SDK: pip install 'noeta[mcp]'") from err
        resolved, _ = resolve(args.alias, config, os.environ)
        tools = await login(args.alias, resolved, McpTokenStore.from_env(), port=args.port or 0)
    except NoetaError as err:
        print(f"noeta mcp login: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(f"logged in to {args.alias!r} ({args.url}); its tools: {', '.join(tools) or '(none)'}")
    return 0


def add_parser(command: Any) -> None:
    """``noeta mcp login`` on the CLI's parser (``command`` adds a subcommand)."""
    mcp = command("mcp", "remote MCP servers: `noeta mcp login ALIAS --url URL` (docs/mcp.md)")
    actions = mcp.add_subparsers(dest="mcp_command", required=True, metavar="ACTION", help="login: a one-time login")
    one = actions.add_parser("login", help="log in to a server once, in the browser; workers use and refresh the tokens")
    one.add_argument("alias", help="the server's alias in mcp_servers")
    one.add_argument("--url", required=True, help="the server's MCP endpoint, exactly as in mcp_servers")
    one.add_argument("--client-id", help="a pre-registered client (default: register one where the server allows)")
    one.add_argument("--client-secret-env", metavar="MCP_NAME", help="the MCP_* variable holding its secret")
    one.add_argument("--scope", help="scopes to ask for besides those the server names")
    one.add_argument("--port", type=int, help="the loopback port the browser returns to (a pre-registered client's)")
