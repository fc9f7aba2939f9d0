"""Typed errors (to_details / rebuild_error), message types and Options validation."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import pytest

from noeta.builtins.llm_policy import LLMPolicy
from noeta.client.options import MAX_GOAL_BYTES, Options, build_task_input, policy_ref
from noeta.errors import (
    AttemptsExhaustedError,
    ConfigurationError,
    ContextLengthError,
    NoetaError,
    PayloadTooLargeError,
    PolicyDecisionError,
    PolicyError,
    ProviderError,
    TaskNotFoundError,
    ToolDefinitionError,
    ToolRetryableError,
    error_type_named,
    rebuild_error,
)
from noeta.protocols.decisions import CallModel
from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    LLMRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from noeta.protocols.step_failures import (
    TASK_FATAL_TOOL_ERRORS,
    subtask_failure_ends_task,
    tool_failure_ends_task,
    validation_gives_up,
)
from noeta.protocols.task import PolicyRef, TaskInput
from noeta.protocols.tool import ToolContext, ToolResult, tool_fingerprint
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import create_sdk_mcp_server, tool

# =========================================================================== errors

_ERROR_FIELDS = {
    AttemptsExhaustedError: ("attempts", "issues", "last_failure_type", "last_data", "last_raw_text"),
    ProviderError: ("provider", "message", "status", "retryable", "retry_after"),
    ContextLengthError: ("provider", "message", "status", "retryable", "retry_after"),
}

_ERRORS = [
    AttemptsExhaustedError(
        attempts=4,
        issues=["timeout", "bad json", "validator said no"],
        last_failure_type="validator",
        last_data={"answer": [1, 2]},
        last_raw_text='{"answer": [1, 2]}',
    ),
    AttemptsExhaustedError(attempts=1),
    ProviderError(provider="anthropic", message="rate limited", status=429, retryable=True, retry_after=1.5),
    ProviderError(provider="openai", message="unreachable"),
    ContextLengthError(provider="anthropic", message="prompt is too long", status=400),
]


@pytest.mark.parametrize("err", _ERRORS, ids=lambda e: type(e).__name__)
def test_to_details_rebuild_error_round_trip(err: NoetaError) -> None:
    details = err.to_details()
    rebuilt = rebuild_error(type(err).__name__, str(err), details)
    assert type(rebuilt) is type(err)
    for name in _ERROR_FIELDS[type(err)]:
        assert getattr(rebuilt, name) == getattr(err, name), name
    assert str(rebuilt) == str(err)
    assert rebuilt.to_details() == details


@pytest.mark.parametrize("err", _ERRORS, ids=lambda e: type(e).__name__)
def test_from_details_on_the_class(err: NoetaError) -> None:
    rebuilt = type(err).from_details(str(err), err.to_details())
    assert type(rebuilt) is type(err)
    assert rebuilt.to_details() == err.to_details()


def test_to_details_is_plain_json_data() -> None:
    import json

    for err in _ERRORS:
        details = err.to_details()
        assert json.loads(json.dumps(details)) == details


def test_attempts_exhausted_message() -> None:
    err = AttemptsExhaustedError(attempts=3, issues=["first", "second", "last issue"])
    assert "All attempts exhausted" in str(err)
    assert str(err) == "All attempts exhausted after 3 attempt(s): last issue"
    assert str(AttemptsExhaustedError(attempts=2)) == "All attempts exhausted after 2 attempt(s)"
    rebuilt = rebuild_error("AttemptsExhaustedError", str(err), err.to_details())
    assert "All attempts exhausted" in str(rebuilt)


def test_attempts_exhausted_details_are_copies() -> None:
    err = AttemptsExhaustedError(attempts=1, issues=["a"])
    details = err.to_details()
    details["issues"].append("b")
    assert err.issues == ["a"]


def test_provider_error_message_and_hierarchy() -> None:
    err = ProviderError(provider="p", message="boom", status=503, retryable=True)
    assert str(err) == "provider 'p' (HTTP 503): boom"
    assert str(ProviderError(provider="p", message="boom")) == "provider 'p': boom"
    assert issubclass(ContextLengthError, ProviderError)
    assert issubclass(ProviderError, NoetaError)
    assert isinstance(err, Exception)


def test_context_length_error_rebuilds_as_context_length_not_provider_error() -> None:
    err = ContextLengthError(provider="p", message="too long", status=400)
    rebuilt = rebuild_error("ContextLengthError", str(err), err.to_details())
    assert type(rebuilt) is ContextLengthError
    assert (rebuilt.provider, rebuilt.message, rebuilt.status, rebuilt.retryable) == ("p", "too long", 400, False)


def test_rebuild_error_unknown_name_returns_none() -> None:
    assert rebuild_error("NoSuchError", "m", {}) is None
    assert rebuild_error("ValueError", "m", {}) is None
    assert rebuild_error(None, "m", {}) is None
    assert rebuild_error("", "m", {}) is None
    assert error_type_named("NoSuchError") is None


def test_rebuild_error_simple_types_keep_message() -> None:
    for cls in (ConfigurationError, PayloadTooLargeError, TaskNotFoundError, ToolDefinitionError):
        err = cls("something specific")
        rebuilt = rebuild_error(cls.__name__, str(err), err.to_details())
        assert type(rebuilt) is cls
        assert str(rebuilt) == "something specific"
        # Without details the ApplicationError message is used.
        assert str(rebuild_error(cls.__name__, "from message", None)) == "from message"


def test_rebuild_error_with_non_dict_details_uses_defaults() -> None:
    rebuilt = rebuild_error("ProviderError", "msg", ["not", "a", "dict"])
    assert type(rebuilt) is ProviderError
    assert (rebuilt.provider, rebuilt.message, rebuilt.status, rebuilt.retryable) == ("?", "msg", None, False)
    exhausted = rebuild_error("AttemptsExhaustedError", "msg", None)
    assert type(exhausted) is AttemptsExhaustedError
    assert (exhausted.attempts, exhausted.issues, exhausted.last_failure_type) == (0, [], "provider")


def test_retryability_flags() -> None:
    assert ConfigurationError.non_retryable is True
    assert ProviderError.non_retryable is True
    assert ToolRetryableError.non_retryable is False
    assert error_type_named("ToolRetryableError") is ToolRetryableError


def test_policy_decision_error_is_a_policy_error_and_travels_by_name() -> None:
    err = PolicyDecisionError("policy returned str, which is not a Decision")
    rebuilt = rebuild_error("PolicyDecisionError", str(err), err.to_details())
    assert type(rebuilt) is PolicyDecisionError and isinstance(rebuilt, PolicyError)
    assert str(rebuilt) == str(err)


def test_every_error_class_is_documented_and_rebuilt_by_its_name() -> None:
    import noeta.errors

    classes = [getattr(noeta.errors, n) for n in noeta.errors.__all__ if isinstance(getattr(noeta.errors, n), type)]
    assert len(classes) > 30
    for cls in classes:
        assert cls.__doc__, cls
        if cls is not NoetaError:
            assert error_type_named(cls.__name__) is cls


def test_step_failure_rules() -> None:
    # The wire strings retry policies and recorded histories carry, named by the classes.
    assert TASK_FATAL_TOOL_ERRORS == (
        "ToolIdentityMismatchError", "ToolNotRegisteredError", "ResourceNotFoundError", "ScopeError",
        # the content store would not take the finished output, or a stored body is damaged or gone
        "ContentStoreError", "ContentIntegrityError", "ContentMissingError",
    )
    assert tool_failure_ends_task("ToolNotRegisteredError") and not tool_failure_ends_task("ToolTimeoutError")
    assert subtask_failure_ends_task("ScopeError") and not subtask_failure_ends_task("ToolNotRegisteredError")
    assert not tool_failure_ends_task(None)
    # max_retries=2: the first answer and two more are checked; the third rejection ends the goal.
    assert [validation_gives_up(n, max_retries=2) for n in (1, 2, 3)] == [False, False, True]


# =========================================================================== message / tool types


def test_content_ref_defaults_and_tag() -> None:
    ref = ContentRef(hash="a" * 64, size=3)
    assert ref.media_type == "text/plain"
    assert ref.type == "ref"


def test_block_type_tags() -> None:
    ref = ContentRef(hash="a" * 64, size=3)
    assert TextBlock(text="t").type == "text"
    assert ImageBlock(source=ref).type == "image"
    assert ToolUseBlock(call_id="c", tool_name="n", arguments={}).type == "tool_use"
    assert ToolResultBlock(call_id="c", output=None, success=True).type == "tool_result"


def test_message_text_and_tool_uses() -> None:
    use = ToolUseBlock(call_id="c1", tool_name="t", arguments={"a": 1})
    message = Message(role="assistant", content=[TextBlock(text="a"), use, TextBlock(text="b")])
    assert message.text == "ab"
    assert message.tool_uses == [use]
    assert message.origin is None


def test_messages_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TextBlock(text="x").text = "y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Message(role="user", content=[]).role = "assistant"  # type: ignore[misc]


def test_llm_request_defaults() -> None:
    req = LLMRequest(model=None, messages=[])
    assert (req.tools, req.system, req.temperature, req.max_tokens, req.metadata) == ([], None, None, None, {})


def test_tool_result_defaults() -> None:
    r = ToolResult(success=True)
    assert (r.output, r.summary, r.output_ref) == (None, None, None)
    assert (r.artifacts, r.images, r.side_effects, r.file_changes) == ([], [], [], [])


def test_tool_context_idempotency_key() -> None:
    ctx = ToolContext(task_id="t1", call_id="c9", tool_name="x", attempt=2)
    assert ctx.idempotency_key == "t1/c9"
    explicit = ToolContext(task_id="t1", call_id="c9", tool_name="x", attempt=1, idempotency_key="k")
    assert explicit.idempotency_key == "k"
    # heartbeat / resources do not take part in equality.
    assert ToolContext("t", "c", "x", 1, heartbeat=lambda: None) == ToolContext("t", "c", "x", 1)


# =========================================================================== Options


def _tool():
    return tool(
        lambda a, c: ToolResult(success=True),
        name="echo",
        version="1.2",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
    )


def test_options_defaults_are_valid() -> None:
    o = Options()
    assert (o.max_turns, o.max_retries, o.allowed_tools, o.policy) == (50, 3, (), None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_turns": 0},
        {"max_turns": -5},
        {"max_turns": 1.5},
        {"max_turns": "10"},
        {"max_retries": -1},
        {"max_retries": 0.5},
        {"max_retries": None},
        {"model_timeout_seconds": 0},
        {"tool_timeout_seconds": -1.0},
        {"allowed_tools": "a string"},
        {"allowed_tools": b"bytes"},
        {"allowed_tools": [object()]},
        {"allowed_tools": ["ok", 42]},
        {"allowed_tools": [lambda a, c: None]},
        {"mcp_servers": {"srv": object()}},
        {"provider": 42},
        {"policy": object()},
    ],
    # Deterministic ids (no memory addresses): pytest-xdist workers must collect the same tests.
    ids=lambda kw: ",".join(f"{k}={re.sub(r' at 0x[0-9a-f]+', '', repr(v))}"[:40] for k, v in kw.items()),
)
def test_invalid_options_raise_configuration_error(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        Options(**kwargs)


def test_configuration_error_messages_name_the_field() -> None:
    with pytest.raises(ConfigurationError, match="max_turns"):
        Options(max_turns=0)
    with pytest.raises(ConfigurationError, match="max_retries"):
        Options(max_retries=-1)
    with pytest.raises(ConfigurationError, match="not a string"):
        Options(allowed_tools="a string")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="neither a tool name nor a Tool"):
        Options(allowed_tools=[object()])  # type: ignore[list-item]


def test_valid_option_edges() -> None:
    t = _tool()
    o = Options(
        max_turns=1,
        max_retries=0,
        allowed_tools=["registered_on_worker", t],
        mcp_servers={"srv": create_sdk_mcp_server("srv", tools=[t])},
        provider=FakeLLMProvider(),
        policy=LLMPolicy(),
    )
    assert o.tool_objects() == [t, t]
    assert o.tool_names() == ["registered_on_worker", "echo"]
    assert Options(provider="worker-provider").provider == "worker-provider"


# --------------------------------------------------------------------------- policy_ref


@dataclass(frozen=True)
class ModulePolicy:
    depth: int = 2
    label: str = "x"

    def decide(self, ctx, view):
        return CallModel()


class PlainModulePolicy:
    def decide(self, ctx, view):
        return CallModel()


def test_policy_ref_none_and_default_policy() -> None:
    assert policy_ref(None) is None
    assert policy_ref(LLMPolicy()) is None


def test_policy_ref_of_module_level_dataclass_policy() -> None:
    ref = policy_ref(ModulePolicy(depth=5, label="deep"))
    assert ref == PolicyRef(path=f"{__name__}:ModulePolicy", params={"depth": 5, "label": "deep"})


def test_policy_ref_of_module_level_plain_policy() -> None:
    assert policy_ref(PlainModulePolicy()) == PolicyRef(path=f"{__name__}:PlainModulePolicy", params={})


def test_policy_ref_of_local_class_raises_configuration_error() -> None:
    class LocalPolicy:
        def decide(self, ctx, view):
            return CallModel()

    # Options accepts it (it has decide) ...
    options = Options(policy=LocalPolicy())
    # ... but it cannot be imported by the workflow.
    with pytest.raises(ConfigurationError, match="module level"):
        policy_ref(LocalPolicy())
    with pytest.raises(ConfigurationError, match="module level"):
        build_task_input(options, "goal", provider_name="fake")


def test_policy_ref_of_main_module_class_raises_configuration_error() -> None:
    cls = type("MainPolicy", (), {"decide": lambda self, ctx, view: CallModel(), "__module__": "__main__"})
    with pytest.raises(ConfigurationError):
        policy_ref(cls())


# --------------------------------------------------------------------------- build_task_input


@pytest.mark.parametrize("goal", ["", "   ", "\n\t", None, 42])
def test_build_task_input_rejects_empty_goal(goal) -> None:
    with pytest.raises(ConfigurationError, match="goal must be a non-empty string"):
        build_task_input(Options(), goal, provider_name="fake")  # type: ignore[arg-type]


def test_build_task_input_goal_size_limit() -> None:
    assert MAX_GOAL_BYTES == 256 * 1024
    at_limit = "a" * MAX_GOAL_BYTES
    assert build_task_input(Options(), at_limit, provider_name="fake").goal == at_limit

    with pytest.raises(PayloadTooLargeError, match=str(MAX_GOAL_BYTES)):
        build_task_input(Options(), "a" * (MAX_GOAL_BYTES + 1), provider_name="fake")


def test_build_task_input_goal_limit_counts_utf8_bytes_not_characters() -> None:
    goal = "é" * (MAX_GOAL_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
    assert len(goal) < MAX_GOAL_BYTES
    with pytest.raises(PayloadTooLargeError):
        build_task_input(Options(), goal, provider_name="fake")


def test_payload_too_large_is_a_noeta_error_not_configuration_error() -> None:
    with pytest.raises(NoetaError) as info:
        build_task_input(Options(), "x" * (MAX_GOAL_BYTES + 10), provider_name="fake")
    assert type(info.value) is PayloadTooLargeError


def test_build_task_input_carries_options(tmp_path) -> None:
    t = _tool()
    options = Options(
        system_prompt="sys",
        model="m",
        allowed_tools=["worker_tool", t],
        max_turns=7,
        max_retries=1,
        policy=ModulePolicy(depth=3),
        temperature=0.2,
        max_tokens=100,
        model_timeout_seconds=10.0,
        tool_timeout_seconds=20.0,
        metadata={"k": "v"},
    )
    ti = build_task_input(options, "do it", provider_name="fake", keep_open=True, workspace_dir=tmp_path, trace_id="tr")
    assert isinstance(ti, TaskInput)
    assert ti.goal == "do it"
    assert ti.provider == "fake"
    assert (ti.model, ti.system_prompt) == ("m", "sys")
    assert ti.tools == ["worker_tool", "echo"]
    assert ti.tool_fingerprints == {"echo": tool_fingerprint("echo", "1.2", t.input_schema)}
    assert ti.tool_fingerprints["echo"] == t.fingerprint
    assert (ti.max_turns, ti.max_retries) == (7, 1)
    assert ti.policy == PolicyRef(path=f"{__name__}:ModulePolicy", params={"depth": 3, "label": "x"})
    assert (ti.keep_open, ti.trace_id, ti.temperature, ti.max_tokens) == (True, "tr", 0.2, 100)
    assert (ti.model_timeout_seconds, ti.tool_timeout_seconds) == (10.0, 20.0)
    assert ti.workspace_dir == str(tmp_path.resolve())
    assert ti.metadata == {"k": "v"}


def test_protocol_types_keep_no_per_instance_dict():
    """A worker holds every cached task's input, run state and transcript; a per-instance
    ``__dict__`` made a decoded TaskInput 5.0 KB instead of 2.5 KB. So every dataclass of
    noeta.protocols is slotted, and one added without slots fails here."""
    import importlib
    import pkgutil

    import noeta.protocols
    from noeta.temporal.converter import NoetaPayloadConverter
    from noeta.protocols.task import TaskInput

    unslotted = []
    for info in pkgutil.iter_modules(noeta.protocols.__path__, "noeta.protocols."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                if "__slots__" not in vars(obj):
                    unslotted.append(f"{module.__name__}.{obj.__qualname__}")
    assert unslotted == []
    # Decoded the way a worker decodes a task's input: still no __dict__, and the same value.
    task = build_task_input(Options(), "goal", provider_name="p")
    converter = NoetaPayloadConverter()
    [decoded] = converter.from_payloads(converter.to_payloads([task]), [TaskInput])
    assert decoded == task and not hasattr(decoded, "__dict__")
    assert not hasattr(decoded.model_activity, "__dict__")
