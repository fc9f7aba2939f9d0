"""The variables logging, tracing and metrics read: Noeta's own (:class:`LogSettings`) and the
standard OpenTelemetry ones that decide whether and where Noeta exports (:class:`OtelSettings`).
The OpenTelemetry SDK reads the rest of its variables itself (headers of traces, resource
attributes...).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError

LEVEL_ENV = "NOETA_LOG_LEVEL"
FORMAT_ENV = "NOETA_LOG_FORMAT"


class LogSettings(EnvSettings):
    """``NOETA_LOG_LEVEL`` (a logging level name, any case; default ``INFO``) and
    ``NOETA_LOG_FORMAT`` (``json`` for one JSON object per line, anything else text)."""

    level: str = Field(default="INFO", validation_alias=LEVEL_ENV)
    json_format: bool = Field(default=False, validation_alias=FORMAT_ENV)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        if raw.upper() not in logging.getLevelNamesMapping():
            raise ConfigurationError(f"{LEVEL_ENV} must be DEBUG, INFO, WARNING or ERROR, got {raw!r}")
        return raw.upper()

    @field_validator("json_format", mode="before")
    @classmethod
    def _json(cls, raw: Any) -> Any:
        return raw.lower() == "json" if isinstance(raw, str) else raw


class OtelSettings(EnvSettings):
    """The standard ``OTEL_*`` variables Noeta itself reads, by their names (empty: unset)."""

    model_config = SettingsConfigDict(env_prefix="")

    otel_sdk_disabled: bool = False
    """``true`` (any case) turns tracing off; any other value leaves it on."""
    otel_traces_exporter: str | None = None
    """``otlp``, ``console`` or ``none`` (lower-cased)."""
    otel_exporter_otlp_endpoint: str | None = None
    otel_exporter_otlp_traces_endpoint: str | None = None
    otel_service_name: str = "noeta"
    otel_metrics_exporter: str = "otlp"
    """``none`` turns OTLP metrics off (lower-cased)."""
    otel_exporter_otlp_metrics_endpoint: str | None = None
    otel_exporter_otlp_protocol: str | None = None
    otel_exporter_otlp_metrics_protocol: str | None = None
    otel_exporter_otlp_headers: str | None = None
    otel_exporter_otlp_metrics_headers: str | None = None
    otel_metric_export_interval: int = 60000
    """Milliseconds between metric exports."""
    otel_instrumentation_genai_capture_message_content: bool = False
    """``true`` (any case) puts prompts and answers on model-call spans (noeta.telemetry.content)."""

    @field_validator("otel_sdk_disabled", "otel_instrumentation_genai_capture_message_content", mode="before")
    @classmethod
    def _disabled(cls, raw: Any) -> Any:
        return raw.strip().lower() == "true" if isinstance(raw, str) else raw

    @field_validator("otel_traces_exporter", "otel_metrics_exporter", mode="before")
    @classmethod
    def _lower(cls, raw: Any) -> Any:
        return raw.strip().lower() if isinstance(raw, str) else raw

    @field_validator("otel_metric_export_interval", mode="before")
    @classmethod
    def _milliseconds(cls, raw: Any, info: ValidationInfo) -> Any:
        if isinstance(raw, str) and not raw.strip().isdigit():
            raise ConfigurationError(f"{cls.variable(info.field_name or '')} must be a whole number of milliseconds, got {raw!r}")
        return raw

    @property
    def traces_exporter_named(self) -> bool:
        """Whether the variables name a trace exporter (an exporter other than ``none``, or an
        OTLP endpoint)."""
        if self.otel_traces_exporter == "none":
            return False
        return bool(self.otel_traces_exporter or self.otel_exporter_otlp_endpoint or self.otel_exporter_otlp_traces_endpoint)


__all__ = ["FORMAT_ENV", "LEVEL_ENV", "LogSettings", "OtelSettings"]
