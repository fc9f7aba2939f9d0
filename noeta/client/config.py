"""Where Noeta finds its Temporal cluster, content store and data, from the environment.

============================  ===============================================================
variable                      meaning
============================  ===============================================================
``TEMPORAL_ADDRESS``          host:port of a Temporal cluster; unset = the embedded dev server
``TEMPORAL_NAMESPACE``        namespace (default ``default``)
``TEMPORAL_API_KEY``          API key for Temporal Cloud (implies TLS)
``TEMPORAL_TLS``              ``1``/``true``/``yes`` to use TLS, ``0``/``false``/``no`` not to
``TEMPORAL_TLS_*``            mTLS and CA files: ``TEMPORAL_TLS_CLIENT_CERT_PATH``,
                              ``TEMPORAL_TLS_CLIENT_KEY_PATH``, ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``,
                              ``TEMPORAL_TLS_SERVER_NAME`` (the ``_DATA`` variants hold PEM text)
``TEMPORAL_PROFILE``          profile of the Temporal config file (default ``default``)
``TEMPORAL_CONFIG_FILE``      Temporal's TOML config file (default
                              ``~/.config/temporalio/temporal.toml``); variables override it
``TEMPORAL_GRPC_META_*``      extra gRPC headers
``NOETA_HOME``                data directory (default ``~/.noeta``): server db, content store
``NOETA_TASK_QUEUE``          task queue of workers and started tasks (default ``noeta``)
``NOETA_CONTENT_DIR``         content store directory (default ``$NOETA_HOME/content``)
``NOETA_CONTENT_STORE``       ``postgresql://...``: a PostgreSQL content store shared by all hosts
``NOETA_MEMORY_DIR``          the memory tool's store (default ``$NOETA_HOME/memory``)
``NOETA_MCP_COMMANDS``        stdio MCP server commands ``noeta worker`` may start (comma-separated,
                              ``*`` for any; unset: none)
``NOETA_DELTA_BROKER``        ``redis://...``: deltas also through Redis (unset: workflow streams)
``NOETA_SHUTDOWN_GRACE_SECONDS``  how long a stopping worker lets running tools finish (60)
``NOETA_CONNECT_TIMEOUT_SECONDS``  how long to keep trying to reach Temporal before giving up (15)
``NOETA_HEALTH_PORT``         port of a worker's ``/healthz`` and ``/readyz`` (unset: none)
``NOETA_INDEXED_METADATA``    ``Options.metadata`` keys to make searchable (comma-separated), as
                              ``key=value`` values of the ``NoetaMetadata`` search attribute
``NOETA_TEMPORAL_UI``         the Temporal UI's address for links (default: the embedded server's)
``NOETA_AGENTS``              the agent catalog, ``package.module:attribute`` (an ``Agents``), that
                              ``start(goal, agent="triage")``, ``noeta run --agent``, HTTP and the
                              console resolve agent names in (unset: none; docs/versions.md)
============================  ===============================================================

The ``TEMPORAL_*`` variables and the config file are Temporal's standard client configuration
(``temporalio.envconfig``), so the same profile works for the ``temporal`` CLI and for Noeta.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource, SettingsConfigDict
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

from noeta.client.visibility import parse_indexed_metadata
from noeta.config.settings import EnvSettings, PlainEnvSource, csv, current_environ
from noeta.context.content_store import ContentStore, LocalContentStore
from noeta.deltas.broker import DELTA_BROKER_VARIABLE
from noeta.errors import ConfigurationError

DEFAULT_TASK_QUEUE = "noeta"
#: Fits the Kubernetes manifests: their terminationGracePeriodSeconds leaves a margin above it.
DEFAULT_SHUTDOWN_GRACE_SECONDS = 60.0
#: Long enough for a dev server or a cluster that is still starting to begin serving gRPC.
DEFAULT_CONNECT_TIMEOUT_SECONDS = 15.0

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
#: The fields Temporal's client profile gives (TemporalProfileSource), never NOETA_* variables.
TEMPORAL_FIELDS = ("temporal_address", "namespace", "api_key", "tls", "temporal_tls", "rpc_metadata")


def load_temporal_profile(environ: Mapping[str, str] | None = None) -> ClientConfigProfile:
    """Temporal's client profile: the config file's ``TEMPORAL_PROFILE`` section with the
    ``TEMPORAL_*`` variables applied over it. Empty variables count as unset; ``TEMPORAL_TLS``
    takes the same words Noeta always accepted."""
    env = {k: v for k, v in (current_environ() if environ is None else environ).items() if v != ""}
    tls = env.get("TEMPORAL_TLS", "").lower()
    if tls in _TRUE:
        env["TEMPORAL_TLS"] = "true"
    elif tls in _FALSE:
        env["TEMPORAL_TLS"] = "false"
    elif "TEMPORAL_TLS" in env:
        raise ConfigurationError(f"TEMPORAL_TLS must be one of {', '.join(_TRUE + _FALSE)}, got {env['TEMPORAL_TLS']!r}")
    try:
        return ClientConfigProfile.load(override_env_vars=env)
    except Exception as err:  # the native loader raises its own ConfigError type
        raise ConfigurationError(f"Temporal client configuration: {err}") from err


class TemporalProfileSource(PydanticBaseSettingsSource):
    """The TEMPORAL_FIELDS from Temporal's client profile (its config file, the ``TEMPORAL_*``
    variables over it), loaded once per Settings."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: ``__call__`` reads the whole profile at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """The Temporal fields of the current profile, read when Settings are built."""
        profile = load_temporal_profile()
        return {
            "temporal_address": profile.address,
            "namespace": profile.namespace or "default",
            "api_key": profile.api_key,
            "tls": (current_environ().get("TEMPORAL_TLS") or "").lower() in _TRUE,
            "temporal_tls": profile.tls,
            "rpc_metadata": dict(profile.grpc_meta),
        }


class NoetaEnvSource(PlainEnvSource):
    """The ``NOETA_*`` variables as plain text, the Temporal fields left to TemporalProfileSource."""

    def __call__(self) -> dict[str, Any]:
        """The ``NOETA_*`` values found, without the fields TemporalProfileSource provides."""
        return {k: v for k, v in super().__call__().items() if k not in TEMPORAL_FIELDS}


class Settings(EnvSettings):
    """Where this process finds Temporal, the content store and its data. Each field comes from a
    keyword argument, else its variable (the table above; empty counts as unset), else its default."""

    model_config = SettingsConfigDict(arbitrary_types_allowed=True)

    temporal_address: str | None = None
    """``TEMPORAL_ADDRESS`` (or the profile's); None: the embedded dev server."""
    namespace: str = "default"
    api_key: str | None = None
    tls: bool = False
    """TLS with the system's CA roots; ``temporal_tls`` holds certificates when there are any."""
    temporal_tls: ClientConfigTLS | None = None
    """TLS settings from the profile and ``TEMPORAL_TLS_*`` (mTLS client certificate, CA, SNI)."""
    rpc_metadata: Mapping[str, str] = Field(default_factory=dict)
    home: Path = Field(default_factory=lambda: Path.home() / ".noeta")
    task_queue: str = DEFAULT_TASK_QUEUE
    content_dir: Path | None = None
    content_store_url: str | None = Field(default=None, validation_alias="NOETA_CONTENT_STORE")
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS
    """On SIGTERM a worker stops polling and gives running activities this long to finish."""
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    """How long connecting keeps retrying an unreachable or still-starting Temporal."""
    health_port: int | None = None
    memory_dir: Path | None = None
    """The memory tool's store, shared by the agents and the host (None: ``home / "memory"``)."""
    mcp_commands: tuple[str, ...] | None = ()
    """stdio MCP server commands a ``noeta worker`` may start (None: any)."""
    delta_broker_url: str | None = Field(default=None, validation_alias=DELTA_BROKER_VARIABLE)
    """A broker through which workers also publish streamed deltas and from which clients then
    read them (None: clients read each task's workflow stream, through Temporal)."""
    indexed_metadata: tuple[str, ...] = ()
    """``Options.metadata`` keys that tasks started here make searchable (NoetaMetadata)."""
    temporal_ui: str | None = None
    """The Temporal UI of the cluster, for task links (the embedded server's UI when unset)."""
    agents: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """The agent catalog (an ``Agents`` at ``package.module:attribute``) agent names resolve in."""

    @classmethod
    def variable_sources(cls) -> tuple[PydanticBaseSettingsSource, ...]:
        """Temporal's profile, then the ``NOETA_*`` variables."""
        return TemporalProfileSource(cls), NoetaEnvSource(cls)

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of the field ``field_name`` (``TEMPORAL_*`` for the profile's)."""
        return "TEMPORAL_*" if field_name in TEMPORAL_FIELDS else super().variable(field_name)

    @field_validator("home", "content_dir", "memory_dir", mode="after")
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return path.expanduser() if path is not None else None

    @field_validator("shutdown_grace_seconds", "connect_timeout_seconds", mode="before")
    @classmethod
    def _seconds(cls, raw: Any, info: Any) -> Any:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = -1.0
        if value < 0:
            raise ConfigurationError(f"{cls.variable(info.field_name)} must be a number of seconds >= 0, got {raw!r}")
        return value

    @field_validator("health_port", mode="before")
    @classmethod
    def _port(cls, raw: Any) -> Any:
        if raw is None:
            return None
        text = str(raw)
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise ConfigurationError(f"NOETA_HEALTH_PORT must be a TCP port number, got {raw!r}")
        return int(text)

    @field_validator("mcp_commands", mode="before")
    @classmethod
    def _commands(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        return None if raw.strip() == "*" else csv(raw)

    @field_validator("indexed_metadata", mode="before")
    @classmethod
    def _indexed_metadata(cls, raw: Any) -> Any:
        return parse_indexed_metadata(raw) if isinstance(raw, str) else raw

    def memory_store(self) -> Any:
        """The memory pool the memory tool of this host's workers reads and writes."""
        from noeta.builtins.memory.impl import MemoryStore

        return MemoryStore(self.memory_dir or self.home / "memory")

    @property
    def embedded(self) -> bool:
        """True when no Temporal address is configured: the client starts (or adopts) the embedded dev server.
        """
        return self.temporal_address is None

    def temporal_connect_config(self, address: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``temporalio.client.Client.connect``; ``address`` is the embedded
        server's (plain, no credentials) when no cluster is configured."""
        if self.embedded:
            return {"target_host": address, "namespace": self.namespace, "tls": False}
        config: dict[str, Any] = {"target_host": self.temporal_address, "namespace": self.namespace}
        if self.api_key:
            config["api_key"] = self.api_key
        if self.rpc_metadata:
            config["rpc_metadata"] = dict(self.rpc_metadata)
        config["tls"] = self._tls()
        return config

    def _tls(self) -> Any:
        """False, True (system CA roots) or a ``TLSConfig`` with the configured certificates."""
        profile = self.temporal_tls
        if profile is not None and profile.disabled:
            return False
        if profile is not None and (
            profile.server_name or profile.server_root_ca_cert or profile.client_cert or profile.client_private_key
        ):
            if bool(profile.client_cert) != bool(profile.client_private_key):
                raise ConfigurationError(
                    "mTLS needs both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or the _DATA variants)"
                )
            try:
                return profile.to_connect_tls_config()
            except OSError as err:
                raise ConfigurationError(f"cannot read a Temporal TLS file: {err}") from err
        return self.tls or self.api_key is not None or (profile is not None and profile.disabled is False)

    def content_store(self) -> ContentStore:
        """The configured store; bodies are encrypted when NOETA_ENCRYPTION_KEYS is set."""
        from noeta.security.sealed_bodies import cipher_from_env

        url = self.content_store_url
        if url and url.startswith(("postgresql://", "postgres://")):
            from noeta.context.postgres_store import PostgresContentStore

            return PostgresContentStore(url, cipher=cipher_from_env())
        if url:
            raise ConfigurationError(f"NOETA_CONTENT_STORE must be a postgresql:// URL, got {url.split(':')[0]}:…")
        return LocalContentStore(self.content_dir or self.home / "content", cipher=cipher_from_env())
