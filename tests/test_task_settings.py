"""Each task setting is declared once (TaskSettings): Options and TaskInput inherit it with its one
default, build_task_input carries it as it is, the HTTP body derives from it, and one function names
the provider a task's input carries."""

from __future__ import annotations

import dataclasses
import typing
import warnings
from typing import Any

import pytest
from pydantic import ValidationError

from noeta.cli.setting_flags import given_settings, setting_flags
from noeta.client.options import Options, SubAgent, build_task_input
from noeta.client.settings_body import attribute_docs, settings_body
from noeta.client.task_input import task_provider_name
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.bounds import BOUNDS, bound_problem
from noeta.protocols.budget import UsageLimits
from noeta.protocols.compaction import Compaction
from noeta.protocols.names import DEFAULT_PROVIDER, INDEX_INTERVAL_SECONDS
from noeta.protocols.task import TaskInput
from noeta.protocols.setting import unwrap_optional
from noeta.protocols.task_settings import EFFORTS, TaskSettings, settings_values
from noeta.sdk.testing import FakeLLMProvider

SETTINGS = [f.name for f in dataclasses.fields(TaskSettings)]

#: A valid value other than the default for every setting.
CHANGED: dict[str, Any] = {
    "system_prompt": "be brief", "model": "m", "max_turns": 7, "max_retries": 1, "provider_retries": 2,
    "tool_retries": 0, "validate_tool_input": True, "thinking": {"type": "adaptive"}, "effort": "low",
    "temperature": 0.5, "max_tokens": 99, "model_timeout_seconds": 12.0, "tool_timeout_seconds": 13.0,
    "metadata": {"team": "a"}, "approval_timeout_seconds": 60.0, "elicitation_hold_seconds": 5.0, "max_history_events": 500,
    "limits": UsageLimits(max_tool_calls=3), "index_interval_seconds": None, "rate_limit_wait_seconds": 5.0,
    "store_outage_wait_seconds": 30.0, "max_tool_output_tokens": 2048,
    "model_activity": ActivityOptions(start_to_close_seconds=9.0), "model_local_activity": True,
    "tool_activity": ActivityOptions(heartbeat_seconds=3.0),
    "mcp_activity": ActivityOptions(retry_max_seconds=5.0),
    "guard_activity": ActivityOptions(start_to_close_seconds=20.0),
    "validator_activity": ActivityOptions(schedule_to_close_seconds=30.0),
    "context_window_tokens": 32_000, "compaction": Compaction(strategy="previews", threshold=0.7), "priority": 1,
}


def test_options_and_task_input_share_each_setting_and_its_default():
    options, task = {f.name: f for f in dataclasses.fields(Options)}, {f.name: f for f in dataclasses.fields(TaskInput)}
    for item in dataclasses.fields(TaskSettings):
        assert options[item.name] == item, item.name  # inherited as declared
        if item.name != "index_interval_seconds":  # the wire keeps the default of older tasks
            assert task[item.name] == item, item.name
    assert task["index_interval_seconds"].default == INDEX_INTERVAL_SECONDS


def test_every_setting_is_documented():
    assert set(attribute_docs(TaskSettings)) == set(SETTINGS)


def test_every_setting_reaches_the_task_input_as_it_is():
    assert set(CHANGED) == set(SETTINGS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # model_timeout_seconds
        options = Options(**CHANGED)
    task = build_task_input(options, "goal", provider_name="p")
    assert settings_values(task) == CHANGED
    assert task.metadata is not options.metadata  # a copy: the caller's dict is not shared


def test_empty_limits_are_not_recorded():
    assert build_task_input(Options(limits=UsageLimits()), "goal", provider_name="p").limits is None


def test_model_timeout_seconds_is_deprecated_and_still_carried():
    with pytest.warns(DeprecationWarning, match="model_activity=ActivityOptions"):
        options = Options(model_timeout_seconds=20)
    assert build_task_input(options, "goal", provider_name="p").model_timeout_seconds == 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Options(model_activity=ActivityOptions(start_to_close_seconds=20))  # the way to set it: no warning


def test_one_provider_name_for_a_task_a_query_and_a_sub_agent():
    fake = FakeLLMProvider(responses=[])
    assert task_provider_name("openai") == "openai"
    assert task_provider_name(fake) == "FakeLLMProvider"
    assert task_provider_name(None) == DEFAULT_PROVIDER
    options = Options(subagents=[SubAgent("inherits", "d"), SubAgent("own", "d", Options(provider=fake))])
    inherits, own = build_task_input(options, "goal", provider_name="p").subagents
    assert (inherits.task.provider, own.task.provider) == ("", "FakeLLMProvider")


def test_the_request_body_derives_from_the_settings():
    body = settings_body()
    assert list(body.model_fields) == SETTINGS
    schema = body.model_json_schema()
    assert schema["properties"]["max_turns"]["description"].startswith("Model calls allowed per goal")
    given = body.model_validate(
        {"max_turns": 5, "temperature": 1, "metadata": None, "model_activity": {"heartbeat_seconds": 5},
         "limits": {"max_cost_usd": 0.5}}
    ).to_settings()
    assert given == {
        "max_turns": 5, "temperature": 1, "model_activity": ActivityOptions(heartbeat_seconds=5),
        "limits": UsageLimits(max_cost_usd=0.5),
    }
    assert Options(**given).max_turns == 5
    for bad in ({"max_turns": "5"}, {"max_turns": True}, {"unknown": 1}, {"model_activity": {"heartbeat": 1}}):
        with pytest.raises(ValidationError):
            body.model_validate(bad)


def test_the_http_api_takes_every_setting_from_the_one_declaration():
    from noeta.http.models import TaskOptions

    assert set(SETTINGS) <= set(TaskOptions.model_fields)
    options = TaskOptions.model_validate({"max_turns": 7, "allowed_tools": ["calculator"],
                                          "tool_activity": {"start_to_close_seconds": 9}}).to_options()
    assert (options.max_turns, options.allowed_tools, options.tool_activity) == (
        7, ["calculator"], ActivityOptions(start_to_close_seconds=9))


def _start_body_schema() -> dict[str, Any]:
    """The OpenAPI schema of the HTTP start body's options, as ``GET /openapi.json`` serves it."""
    from noeta.http import create_app
    from noeta.http.quotas import SpendQuotas
    from noeta.security.http_guard import GuardConfig

    app = create_app(None, guard=GuardConfig(), quotas=SpendQuotas(), with_console=False)  # type: ignore[arg-type]
    spec = app.openapi()
    return spec["components"]["schemas"]["TaskOptions"]["properties"]


def test_every_number_setting_has_its_range_on_its_field_and_the_changed_value_is_in_it():
    hints = typing.get_type_hints(TaskSettings)
    numbers = {name for name in SETTINGS if unwrap_optional(hints[name])[0] in (int, float)}
    assert set(BOUNDS) == numbers
    for name, bound in BOUNDS.items():
        assert bound_problem(name, CHANGED[name]) is None, name
        assert bound_problem(name, bound.highest * 2) is not None, name


def test_the_start_body_schema_shows_each_settings_default_and_range():
    schema = _start_body_schema()
    assert (schema["max_turns"]["default"], schema["max_turns"]["minimum"], schema["max_turns"]["maximum"]) == (50, 1, 10_000)
    assert schema["tool_timeout_seconds"]["exclusiveMinimum"] == 0  # above 0, not from 0
    defaults = {f.name: f.default for f in dataclasses.fields(TaskSettings) if f.default is not dataclasses.MISSING}
    for name, default in defaults.items():
        assert schema[name].get("default") == default, name  # FastAPI leaves out a null default
    for name, bound in BOUNDS.items():
        low = "exclusiveMinimum" if bound.above_lowest else "minimum"
        assert (schema[name][low], schema[name]["maximum"]) == (bound.lowest, bound.highest), name
    assert schema["effort"]["enum"] == [*EFFORTS, None]
    assert schema["model_timeout_seconds"]["deprecated"] is True


def test_the_cli_shows_and_checks_each_setting_as_the_api_does(capsys: pytest.CaptureFixture[str]):
    from noeta.cli.parser import build

    with pytest.raises(SystemExit):
        build().parse_args(["run", "--help"])  # `noeta run --help`
    run_help = " ".join(capsys.readouterr().out.split())
    schema = _start_body_schema()
    assert f"--max-turns N model calls allowed per goal; beyond it the goal ends with status \"failed\" (default {schema['max_turns']['default']})" in run_help
    flags = {flag.name: flag for flag in setting_flags()}
    hints = typing.get_type_hints(TaskSettings)
    plain = {name for name in SETTINGS if unwrap_optional(hints[name])[0] in (str, int, float, bool)}
    assert set(flags) == plain - {"model_timeout_seconds"}  # deprecated: no flag
    for name, flag in flags.items():
        assert flag.default == schema[name].get("default"), name
        if flag.default is not None:
            shown = f"(default {'on' if flag.default else 'off'})" if flag.kind is bool else f"(default {flag.default:g})"
            assert f"{flag.flag}" in run_help and shown in flag.help, name
    for command in ("run", "start"):
        for name, bound in BOUNDS.items():
            if name not in flags:
                continue
            with pytest.raises(SystemExit):
                build().parse_args([command, "goal", flags[name].flag, str(bound.highest * 2)])
            assert bound_problem(name, bound.highest * 2) in capsys.readouterr().err, name
        parsed = build().parse_args([command, "goal", "--max-turns", "7", "--system", "s", "--effort", "low"])
        assert given_settings(parsed) == {"max_turns": 7, "system_prompt": "s", "effort": "low"}
        assert given_settings(build().parse_args([command, "goal"])) == {}  # Options' defaults apply
