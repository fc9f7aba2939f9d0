"""Where Noeta finds its Temporal cluster, content store and data, from the environment.

============================  ===============================================================
variable                      meaning
============================  ===============================================================
``TEMPORAL_ADDRESS``          host:port of a Temporal cluster; unset = the embedded dev server
``TEMPORAL_NAMESPACE``        namespace (default ``default``)
``TEMPORAL_API_KEY``          API key for Temporal Cloud (implies TLS)
``TEMPORAL_TLS``              ``1`` to use TLS without an API key
``NOETA_HOME``                data directory (default ``~/.noeta``): server db, content store
``NOETA_TASK_QUEUE``          task queue of workers and started tasks (default ``noeta``)
``NOETA_CONTENT_DIR``         content store directory (default ``$NOETA_HOME/content``)
``NOETA_CONTENT_STORE``       ``postgresql://...``: a PostgreSQL content store shared by all hosts
============================  ===============================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from noeta.context.content_store import ContentStore, LocalContentStore
from noeta.errors import ConfigurationError

DEFAULT_TASK_QUEUE = "noeta"


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None


@dataclass(frozen=True)
class Settings:
    temporal_address: str | None = field(default_factory=lambda: _env("TEMPORAL_ADDRESS"))
    namespace: str = field(default_factory=lambda: _env("TEMPORAL_NAMESPACE") or "default")
    api_key: str | None = field(default_factory=lambda: _env("TEMPORAL_API_KEY"))
    tls: bool = field(default_factory=lambda: (_env("TEMPORAL_TLS") or "") in ("1", "true", "yes"))
    home: Path = field(
        default_factory=lambda: Path(_env("NOETA_HOME") or Path.home() / ".noeta").expanduser()
    )
    task_queue: str = field(default_factory=lambda: _env("NOETA_TASK_QUEUE") or DEFAULT_TASK_QUEUE)
    content_dir: Path | None = field(
        default_factory=lambda: Path(d).expanduser() if (d := _env("NOETA_CONTENT_DIR")) else None
    )
    content_store_url: str | None = field(default_factory=lambda: _env("NOETA_CONTENT_STORE"))

    @property
    def embedded(self) -> bool:
        return self.temporal_address is None

    def content_store(self) -> ContentStore:
        url = self.content_store_url
        if url and url.startswith(("postgresql://", "postgres://")):
            from noeta.context.postgres_store import PostgresContentStore

            return PostgresContentStore(url)
        if url:
            raise ConfigurationError(f"NOETA_CONTENT_STORE must be a postgresql:// URL, got {url.split(':')[0]}:…")
        return LocalContentStore(self.content_dir or self.home / "content")
