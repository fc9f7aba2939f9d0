"""Temporal connection settings through Temporal's standard client configuration: ``TEMPORAL_*``
variables (today's ones keep working), TOML profiles, and TLS / mTLS, connected for real through
a TLS-terminating proxy in front of the dev server."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from noeta.client.client import AsyncClient, connect_temporal
from noeta.client.config import DEFAULT_SHUTDOWN_GRACE_SECONDS, Settings
from noeta.client.options import HostConfig
from noeta.errors import ConfigurationError, TemporalUnavailableError
from tests.support.tls import Pki, TlsProxy, make_pki

TEMPORAL_VARIABLES = (
    "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME", "NOETA_SHUTDOWN_GRACE_SECONDS",
    "NOETA_HEALTH_PORT",
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No Temporal configuration but what the test sets (and no user config file)."""
    for name in TEMPORAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    return monkeypatch


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_nothing_configured_is_the_embedded_server(env):
    settings = Settings()
    assert settings.embedded
    assert settings.temporal_connect_config("127.0.0.1:7999") == {
        "target_host": "127.0.0.1:7999", "namespace": "default", "tls": False,
    }
    assert settings.shutdown_grace_seconds == DEFAULT_SHUTDOWN_GRACE_SECONDS
    assert settings.health_port is None


def test_todays_variables_keep_their_meaning(env):
    env.setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
    env.setenv("TEMPORAL_NAMESPACE", "prod")
    assert Settings().temporal_connect_config() == {
        "target_host": "temporal.example:7233", "namespace": "prod", "tls": False,
    }
    env.setenv("TEMPORAL_TLS", "yes")
    assert Settings().temporal_connect_config()["tls"] is True
    env.setenv("TEMPORAL_TLS", "no")
    assert Settings().temporal_connect_config()["tls"] is False
    env.delenv("TEMPORAL_TLS")
    env.setenv("TEMPORAL_API_KEY", "secret-key")  # implies TLS
    config = Settings().temporal_connect_config()
    assert (config["api_key"], config["tls"]) == ("secret-key", True)


def test_bad_values_are_configuration_errors(env):
    env.setenv("TEMPORAL_TLS", "maybe")
    with pytest.raises(ConfigurationError, match="TEMPORAL_TLS must be one of"):
        Settings()
    env.delenv("TEMPORAL_TLS")
    env.setenv("NOETA_SHUTDOWN_GRACE_SECONDS", "soon")
    with pytest.raises(ConfigurationError, match="NOETA_SHUTDOWN_GRACE_SECONDS must be a number"):
        Settings()
    env.setenv("NOETA_SHUTDOWN_GRACE_SECONDS", "45")
    env.setenv("NOETA_HEALTH_PORT", "99999")
    with pytest.raises(ConfigurationError, match="NOETA_HEALTH_PORT must be a TCP port"):
        Settings()
    env.setenv("NOETA_HEALTH_PORT", "8081")
    assert (Settings().shutdown_grace_seconds, Settings().health_port) == (45.0, 8081)


def test_a_profile_from_the_config_file_with_variables_over_it(env, tmp_path: Path):
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.default]\naddress = "localhost:7233"\n\n'
        '[profile.prod]\naddress = "prod.example:7233"\nnamespace = "agents"\napi_key = "from-file"\n'
        '[profile.prod.grpc_meta]\nx-team = "back-office"\n'
    )
    env.setenv("TEMPORAL_CONFIG_FILE", str(config))
    assert Settings().temporal_address == "localhost:7233"
    env.setenv("TEMPORAL_PROFILE", "prod")
    settings = Settings()
    assert settings.temporal_connect_config() == {
        "target_host": "prod.example:7233", "namespace": "agents", "api_key": "from-file",
        "rpc_metadata": {"x-team": "back-office"}, "tls": True,
    }
    env.setenv("TEMPORAL_NAMESPACE", "staging")  # a variable overrides the file
    assert Settings().namespace == "staging"
    env.setenv("TEMPORAL_PROFILE", "nope")
    with pytest.raises(ConfigurationError, match="Profile 'nope' not found"):
        Settings()


def test_mtls_files_become_a_tls_config(env, pki: Pki):
    env.setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
    env.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(pki.client_cert))
    env.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(pki.client_key))
    env.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.ca_cert))
    env.setenv("TEMPORAL_TLS_SERVER_NAME", "temporal.test")
    tls = Settings().temporal_connect_config()["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert, tls.domain) == (
        pki.client_cert.read_bytes(), pki.client_key.read_bytes(), pki.ca_cert.read_bytes(), "temporal.test",
    )
    env.delenv("TEMPORAL_TLS_CLIENT_KEY_PATH")
    with pytest.raises(ConfigurationError, match="mTLS needs both"):
        Settings().temporal_connect_config()
    env.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(pki.client_key.with_name("missing.key")))
    with pytest.raises(ConfigurationError, match="cannot read a Temporal TLS file"):
        Settings().temporal_connect_config()


async def test_a_profile_file_points_a_client_at_the_cluster(env, settings: Settings, tmp_path: Path):
    config = tmp_path / "temporal.toml"
    config.write_text(f'[profile.default]\naddress = "{settings.temporal_address}"\n')
    env.setenv("TEMPORAL_CONFIG_FILE", str(config))
    client = await AsyncClient.connect(HostConfig(settings=Settings(home=tmp_path)))
    assert client.server is None  # not the embedded server: the profile's cluster
    assert (await client.temporal.service_client.check_health()) is True


async def test_mtls_connects_through_a_tls_frontend_and_needs_the_client_certificate(
    env, settings: Settings, pki: Pki, tmp_path: Path
):
    async with TlsProxy(pki, settings.temporal_address) as address:
        env.setenv("TEMPORAL_ADDRESS", address)
        env.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.ca_cert))
        env.setenv("TEMPORAL_TLS_SERVER_NAME", "temporal.test")
        without_certificate = Settings(home=tmp_path)
        with pytest.raises(TemporalUnavailableError, match=f"cannot connect to Temporal at {address}"):
            await connect_temporal(without_certificate, connect_timeout=1)

        env.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(pki.client_cert))
        env.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(pki.client_key))
        temporal, server = await connect_temporal(Settings(home=tmp_path))
        assert server is None
        assert (await temporal.count_workflows()).count >= 0


def test_noeta_variables_through_the_settings_model(env, tmp_path: Path):
    env.setenv("NOETA_HOME", str(tmp_path))
    env.setenv("NOETA_MCP_COMMANDS", "npx, uvx")
    env.setenv("NOETA_CONTENT_STORE", "postgresql://db/noeta")
    env.setenv("NOETA_DELTA_BROKER", "redis://cache:6379/0")
    env.setenv("NOETA_INDEXED_METADATA", "team,project")
    env.setenv("NOETA_TASK_QUEUE", "")  # empty counts as unset
    settings = Settings()
    assert (settings.home, settings.mcp_commands, settings.task_queue) == (tmp_path, ("npx", "uvx"), "noeta")
    assert (settings.content_store_url, settings.delta_broker_url) == ("postgresql://db/noeta", "redis://cache:6379/0")
    assert settings.indexed_metadata == ("team", "project")
    env.setenv("NOETA_MCP_COMMANDS", "*")
    assert Settings().mcp_commands is None  # any command
    # A keyword argument wins over the variable.
    assert Settings(content_store_url=None, home=tmp_path / "x").content_store_url is None
    # The Temporal fields come from Temporal's variables and profile only.
    env.setenv("NOETA_NAMESPACE", "not-read")
    assert Settings().namespace == "default"
    env.setenv("NOETA_INDEXED_METADATA", "not a key")
    with pytest.raises(ConfigurationError, match="NOETA_INDEXED_METADATA"):
        Settings()
    env.delenv("NOETA_INDEXED_METADATA")
    with pytest.raises(ConfigurationError, match="home"):
        Settings(home=3)
