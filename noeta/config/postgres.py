"""What every PostgreSQL-backed part of Noeta (the content store and its step records, the API
keys table, shared rate limits) needs first: the driver of the ``noeta[postgres]`` extra, loaded
only when PostgreSQL is configured, and a table name it may write into its SQL (an identifier
cannot be a bound parameter, so the name is checked instead)."""

from __future__ import annotations

import re
from typing import Any

from noeta.errors import ConfigurationError

#: The longest table name accepted: PostgreSQL silently cuts a longer identifier.
MAX_TABLE_CHARS = 63

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def psycopg_driver(what: str) -> Any:
    """The ``psycopg`` module; ConfigurationError saying ``what`` needs the extra when it is
    missing."""
    try:
        import psycopg
    except ImportError as err:
        raise ConfigurationError(f"{what} needs: pip install 'noeta[postgres]'") from err
    return psycopg


def table_name(table: str) -> str:
    """``table`` if it is a plain SQL identifier (ASCII letters, digits and ``_``, not starting
    with a digit, at most MAX_TABLE_CHARS); ConfigurationError otherwise."""
    if not isinstance(table, str) or _TABLE.fullmatch(table) is None or len(table) > MAX_TABLE_CHARS:
        raise ConfigurationError(
            f"invalid table name {table!r}: use ASCII letters, digits and _ (not first), at most {MAX_TABLE_CHARS}"
        )
    return table
