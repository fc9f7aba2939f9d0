"""The settings models read from the environment: each variable is read, empty (or blank where that
was always so) counts as unset, and a bad value is a ConfigurationError naming its variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import field_validator

from noeta.config.settings import EnvSettings, csv
from noeta.config.tuning import SETTINGS as TUNING
from noeta.config.tuning import WorkerTuning
from noeta.deltas.broker import DeltaSettings
from noeta.errors import ConfigurationError, EncryptionKeyError
from noeta.providers.pricing import PriceSettings
from noeta.providers.settings import ProviderSettings
from noeta.security.http_guard import CodecServerSettings, GuardConfig, ServerSettings
from noeta.security.keys import EncryptionSettings, new_key_entry
from noeta.telemetry.settings import LogSettings, OtelSettings

KEY = "k" * 32
TOKEN = "t" * 32


class Example(EnvSettings):
    count: int = 3
    names: tuple[str, ...] = ()

    @field_validator("names", mode="before")
    @classmethod
    def _names(cls, raw: Any) -> Any:
        return csv(raw)


def test_the_base_reads_a_given_environment_and_names_the_variable_of_a_bad_value(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NOETA_COUNT", "9")
    assert Example().count == 9
    assert Example.from_env({}).count == 3  # the given environment only, not the process's
    assert Example.from_env({"NOETA_COUNT": ""}).count == 3  # empty: unset
    assert Example.from_env({"NOETA_COUNT": "4"}, count=5).count == 5  # a keyword argument wins
    assert Example.from_env({"NOETA_NAMES": "a, b,"}).names == ("a", "b")  # plain text, never JSON
    with pytest.raises(ConfigurationError, match=r"count \(NOETA_COUNT\)"):
        Example.from_env({"NOETA_COUNT": "many"})
    assert Example.variable("count") == "NOETA_COUNT"


def test_worker_tuning_reads_every_variable():
    environ = {setting.variable: str(index + 2) for index, setting in enumerate(TUNING.values())}
    tuning = WorkerTuning.from_env(environ)
    assert [getattr(tuning, name) for name in TUNING] == [index + 2 for index in range(len(TUNING))]
    assert WorkerTuning.from_env({s.variable: "" for s in TUNING.values()}) == WorkerTuning.from_env({})
    assert WorkerTuning.from_env({}).max_activities == TUNING["max_activities"].default
    with pytest.raises(ConfigurationError, match="NOETA_IO_THREADS must be a whole number"):
        WorkerTuning.from_env({"NOETA_IO_THREADS": "eight"})


def test_encryption_settings(tmp_path: Path):
    entry = new_key_entry("v1")
    assert EncryptionSettings.from_env({}).keyring() is None
    assert EncryptionSettings.from_env({"NOETA_ENCRYPTION_KEYS": "", "NOETA_CODEC": ""}).codec is None
    ring = EncryptionSettings.from_env({"NOETA_ENCRYPTION_KEYS": entry}).keyring()
    assert ring is not None and ring.active_id == "v1"
    path = tmp_path / "keys"
    path.write_text(entry + "\n")
    settings = EncryptionSettings.from_env({"NOETA_ENCRYPTION_KEYS_FILE": str(path)})
    assert settings.keys_file == path
    path.write_text(new_key_entry("v2") + "\n")  # a rotated file counts at the next load
    assert (ring := settings.keyring()) is not None and ring.active_id == "v2"
    assert EncryptionSettings.from_env({"NOETA_CODEC": "pkg.mod:factory"}).codec == "pkg.mod:factory"
    with pytest.raises(EncryptionKeyError, match="NOETA_ENCRYPTION_KEYS: "):
        EncryptionSettings.from_env({"NOETA_ENCRYPTION_KEYS": "nokey"})
    path.write_text("k:not*base64\n")
    with pytest.raises(EncryptionKeyError, match="NOETA_ENCRYPTION_KEYS_FILE: "):
        settings.keyring()
    with pytest.raises(EncryptionKeyError, match="NOETA_ENCRYPTION_KEYS_FILE"):
        EncryptionSettings.from_env({"NOETA_ENCRYPTION_KEYS_FILE": str(tmp_path / "missing")}).keyring()


def test_server_settings(tmp_path: Path):
    path = tmp_path / "keys"
    path.write_text(f"# ops\n{TOKEN}\n")
    settings = ServerSettings.from_env({
        "NOETA_API_KEYS": f"{KEY}, ", "NOETA_API_KEYS_FILE": str(path), "NOETA_ALLOWED_HOSTS": "API.example,b",
        "NOETA_CORS_ORIGINS": "https://ui.example/", "NOETA_ALLOW_UNAUTHENTICATED": "1",
    })
    assert settings.api_keys == (KEY,) and settings.credentials() == (KEY, TOKEN)
    assert settings.allowed_hosts == ("api.example", "b") and settings.cors_origins == ("https://ui.example",)
    assert settings.allow_unauthenticated
    path.write_text(f"{KEY}\n")  # the guard reads the file itself (and again whenever it changes)
    guard = settings.guard()
    assert (guard.api_keys, guard.keys_file) == ((KEY,), path)
    empty = ServerSettings.from_env({n: "" for n in ("NOETA_API_KEYS", "NOETA_ALLOWED_HOSTS", "NOETA_ALLOW_UNAUTHENTICATED")})
    assert (empty.api_keys, empty.allowed_hosts, empty.allow_unauthenticated) == ((), GuardConfig().allowed_hosts, False)
    assert not ServerSettings.from_env({"NOETA_ALLOW_UNAUTHENTICATED": "yes"}).allow_unauthenticated  # only "1"
    with pytest.raises(ConfigurationError, match="NOETA_API_KEYS must be at least 16"):
        ServerSettings.from_env({"NOETA_API_KEYS": "short"})


def test_codec_server_settings():
    settings = CodecServerSettings.from_env({
        "NOETA_CODEC_TOKENS": TOKEN, "NOETA_CODEC_CORS_ORIGINS": "http://localhost:8233",
        "NOETA_CODEC_ALLOWED_HOSTS": "codec.internal", "NOETA_API_KEYS": KEY, "NOETA_ALLOW_UNAUTHENTICATED": "1",
    })
    assert settings.credentials() == (TOKEN,) and settings.cors_origins == ("http://localhost:8233",)
    assert settings.allowed_hosts == ("codec.internal",) and settings.allow_unauthenticated
    assert CodecServerSettings.from_env({"NOETA_CODEC_TOKENS": ""}).tokens == ()
    with pytest.raises(ConfigurationError, match="NOETA_CODEC_TOKENS must be at least 16"):
        CodecServerSettings.from_env({"NOETA_CODEC_TOKENS": "short"})


def test_quota_settings():
    from noeta.http.quotas import QuotaSettings

    settings = QuotaSettings.from_env(
        {"NOETA_KEY_DAILY_USD": "5", "NOETA_KEY_QUOTAS": "abc=1.5, def=2", "NOETA_TASK_MAX_COST_USD": " 0.5 "}
    )
    assert (settings.daily_usd, dict(settings.per_key), settings.task_max_cost_usd) == (5.0, {"abc": 1.5, "def": 2.0}, 0.5)
    blank = QuotaSettings.from_env({"NOETA_KEY_DAILY_USD": " ", "NOETA_KEY_QUOTAS": "", "NOETA_TASK_MAX_COST_USD": ""})
    assert (blank.daily_usd, dict(blank.per_key), blank.task_max_cost_usd) == (None, {}, None)
    for variable, bad in (("NOETA_KEY_DAILY_USD", "-1"), ("NOETA_TASK_MAX_COST_USD", "lots"), ("NOETA_KEY_QUOTAS", "abc")):
        with pytest.raises(ConfigurationError, match=variable):
            QuotaSettings.from_env({variable: bad})


def test_price_settings():
    prices = PriceSettings.from_env({"NOETA_PRICES": '{"m": {"input_per_mtok": 1, "output_per_mtok": 2}}'}).prices
    assert prices["m"].output_per_mtok == 2
    assert PriceSettings.from_env({"NOETA_PRICES": "  "}).prices == {}
    with pytest.raises(ConfigurationError, match="NOETA_PRICES"):
        PriceSettings.from_env({"NOETA_PRICES": "{not json"})


def test_provider_settings():
    names = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "NOETA_MODEL")
    settings = ProviderSettings.from_env({name: f" {name.lower()} " for name in names})
    assert (
        settings.anthropic_api_key, settings.anthropic_base_url, settings.openai_api_key, settings.openai_base_url,
        settings.model,
    ) == tuple(name.lower() for name in names)
    blank = ProviderSettings.from_env({name: " " for name in names})
    assert blank == ProviderSettings.from_env({}) and blank.openai_api_key is None and blank.model is None


def test_delta_settings():
    assert DeltaSettings.from_env({"NOETA_DELTA_BROKER": "redis://localhost:6379/0"}).url == "redis://localhost:6379/0"
    assert DeltaSettings.from_env({"NOETA_DELTA_BROKER": ""}).url is None
    with pytest.raises(ConfigurationError, match="NOETA_DELTA_BROKER must be a redis:// URL"):
        DeltaSettings.from_env({"NOETA_DELTA_BROKER": "http://broker"})
    assert DeltaSettings.from_env({}).workflow_stream  # on by default
    assert DeltaSettings.from_env({"NOETA_WORKFLOW_STREAM": ""}).workflow_stream
    assert not DeltaSettings.from_env({"NOETA_WORKFLOW_STREAM": "0"}).workflow_stream
    with pytest.raises(ConfigurationError, match="NOETA_WORKFLOW_STREAM"):
        DeltaSettings.from_env({"NOETA_WORKFLOW_STREAM": "sometimes"})
    assert DeltaSettings.from_env({}).first_batch_seconds == 1.5
    assert DeltaSettings.from_env({"NOETA_STREAM_FIRST_BATCH": "0.5"}).first_batch_seconds == 0.5
    for bad in ("-1", "soon", "61"):
        with pytest.raises(ConfigurationError, match="NOETA_STREAM_FIRST_BATCH"):
            DeltaSettings.from_env({"NOETA_STREAM_FIRST_BATCH": bad})


def test_log_settings():
    settings = LogSettings.from_env({"NOETA_LOG_LEVEL": "debug", "NOETA_LOG_FORMAT": "JSON"})
    assert (settings.level, settings.json_format) == ("DEBUG", True)
    default = LogSettings.from_env({"NOETA_LOG_LEVEL": "", "NOETA_LOG_FORMAT": ""})
    assert (default.level, default.json_format) == ("INFO", False)
    assert not LogSettings.from_env({"NOETA_LOG_FORMAT": "text"}).json_format
    with pytest.raises(ConfigurationError, match="NOETA_LOG_LEVEL"):
        LogSettings.from_env({"NOETA_LOG_LEVEL": "loud"})


def test_otel_settings():
    text = ("TRACES_EXPORTER", "EXPORTER_OTLP_ENDPOINT", "EXPORTER_OTLP_TRACES_ENDPOINT", "SERVICE_NAME",
            "METRICS_EXPORTER", "EXPORTER_OTLP_METRICS_ENDPOINT", "EXPORTER_OTLP_PROTOCOL",
            "EXPORTER_OTLP_METRICS_PROTOCOL", "EXPORTER_OTLP_HEADERS", "EXPORTER_OTLP_METRICS_HEADERS")
    environ = {f"OTEL_{name}": "x" for name in text}
    settings = OtelSettings.from_env(
        {**environ, "OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": " Console ", "OTEL_METRIC_EXPORT_INTERVAL": "500"}
    )
    assert settings.otel_sdk_disabled and settings.otel_traces_exporter == "console"
    assert settings.otel_metric_export_interval == 500 and settings.otel_service_name == "x"
    assert all(getattr(settings, name.lower()) == "x" for name in environ if name != "OTEL_TRACES_EXPORTER")
    default = OtelSettings.from_env({name: "" for name in (*environ, "OTEL_METRIC_EXPORT_INTERVAL")})
    assert default == OtelSettings.from_env({}) and default.otel_service_name == "noeta"
    assert not default.traces_exporter_named and default.otel_metric_export_interval == 60000
    assert OtelSettings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}).traces_exporter_named
    assert not OtelSettings.from_env({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}).traces_exporter_named
    with pytest.raises(ConfigurationError, match="OTEL_METRIC_EXPORT_INTERVAL"):
        OtelSettings.from_env({"OTEL_METRIC_EXPORT_INTERVAL": "soon"})


def test_a_codec_server_without_tokens_takes_only_admin_keys(tmp_path):
    """Decoding shows any tenant's payloads: a tenant's key (read, approve...) may not stand in for
    the codec server's tokens; the admin keys of noeta serve may (NOETA_API_KEYS are all admin)."""
    from noeta.security.codec_server import guard_from_env

    tenant_key, admin_key, plain_key = "t" * 32, "a" * 32, "p" * 32
    keys = tmp_path / "keys"
    keys.write_text(f"{tenant_key} ana acme read,approve\n{admin_key} ops acme admin\n{plain_key}\n")
    guard = guard_from_env("127.0.0.1", {"NOETA_API_KEYS": KEY, "NOETA_API_KEYS_FILE": str(keys)})
    assert sorted(guard.api_keys) == sorted((KEY, admin_key, plain_key))
    tokens = guard_from_env("127.0.0.1", {"NOETA_CODEC_TOKENS": TOKEN, "NOETA_API_KEYS_FILE": str(keys)})
    assert tokens.api_keys == (TOKEN,)
