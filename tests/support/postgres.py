"""The test PostgreSQL server: its DSN, and a check that skips a test without it (unless CI's
NOETA_REQUIRE_POSTGRES=1 makes a missing server a failure)."""

from __future__ import annotations

import os

import pytest

DSN = os.environ.get("NOETA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def require_postgres() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as err:
        if os.environ.get("NOETA_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"no PostgreSQL at {DSN}: {err}")
