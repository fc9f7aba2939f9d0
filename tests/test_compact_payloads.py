"""Payloads of Noeta's dataclasses leave out fields at their defaults; decoding restores them.

The defaults are therefore part of what a recorded history means: ``wire_defaults.json`` pins them,
and ``test_wire_defaults_never_change`` fails when one changes. Adding a field or a class is safe:
regenerate the file with ``python -m tests.test_compact_payloads``. Changing or removing a default
is not: payloads already recorded would decode to the new value.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import to_json

import noeta.protocols.activity_io as activity_io
from noeta.temporal.converter import NoetaPayloadConverter, noeta_dataclass_schemas, type_adapter
from noeta.protocols.attempts import AttemptBudget, AttemptFailure
from noeta.protocols.interaction import ApprovalInput, GoalInput, InjectInput
from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    LLMResponse,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.run_state import BudgetWarningRecord, Carry, ToolRefusal
from noeta.protocols.held_questions import HeldQuestion
from noeta.protocols.task import TaskInput, TaskResult
from noeta.protocols.tool import ToolResult

WIRE_DEFAULTS = Path(__file__).with_name("wire_defaults.json")

#: What Temporal stores of Noeta: activity inputs and outputs, the workflow's input and result,
#: updates, signals and memos. Every Noeta dataclass reachable from these is pinned.
PAYLOAD_ROOTS: list[type] = [
    *(cls for cls in vars(activity_io).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)
      and cls.__module__ == activity_io.__name__),
    TaskInput, TaskResult, Carry, GoalInput, InjectInput, ApprovalInput, ToolRefusal, BudgetWarningRecord,
    HeldQuestion,
]

converter = NoetaPayloadConverter()
REF = ContentRef(hash="ab" * 32, size=478)


def payload_json(value: Any) -> dict[str, Any]:
    [payload] = converter.to_payloads([value])
    data: dict[str, Any] = json.loads(payload.data)
    return data


def round_trip(value: Any) -> Any:
    return converter.from_payloads(converter.to_payloads([value]), [type(value)])[0]


def test_fields_at_their_defaults_are_left_out_and_come_back_on_decoding():
    out = activity_io.CallModelOutput(response=LLMResponse(stop_reason="end_turn", content=[TextBlock("hi")]), head=REF)
    data = payload_json(out)
    assert set(data) == {"response", "head"}
    assert data["head"] == {"hash": REF.hash, "size": 478, "type": "ref"}  # media_type at its default
    assert data["response"] == {"stop_reason": "end_turn", "content": [{"text": "hi", "type": "text"}]}
    assert round_trip(out) == out


def test_fields_that_differ_from_their_defaults_are_written():
    failure = AttemptFailure(attempt=1, error="slow down", error_type="RateLimited", delay=2.0)
    out = activity_io.InvokeToolOutput(
        result=ToolResult(success=False, output="boom"), attempt=2, retried=[failure],
        memories=["m"], resource_calls_dropped=3, from_record=True,
    )
    data = payload_json(out)
    assert {"attempt", "retried", "memories", "resource_calls_dropped", "from_record"} <= set(data)
    assert "resource_calls" not in data
    assert round_trip(out) == out


def test_every_blocks_type_tag_is_written_so_the_union_decodes():
    blocks = [TextBlock("t"), ImageBlock(REF), ToolUseBlock("c1", "tool", {}), ToolResultBlock("c1", REF, True),
              ThinkingBlock()]
    message = Message(role="assistant", content=blocks)
    data = payload_json(message)
    assert [b["type"] for b in data["content"]] == ["text", "image", "tool_use", "tool_result", "thinking"]
    assert round_trip(message) == message


def test_false_and_zero_are_not_taken_for_a_default_of_another_type():
    # A float field holding the int 0 still equals its default 0.0, but is written: decoding
    # returns what was sent whatever its annotation says.
    usage = Usage(cost_usd=0)  # type: ignore[arg-type]  # an int where a float is declared
    assert payload_json(usage)["cost_usd"] == 0
    assert "cost_usd" not in payload_json(Usage())


def test_a_dataclass_default_is_compared_by_what_is_written():
    # == on dataclasses skips compare=False fields (ImageBlock.data): a value differing only there
    # is not its default, or the difference would be lost on the way.
    from noeta.temporal.converter import _equals

    is_default = _equals(ImageBlock(REF, data="aGk="))
    assert is_default(ImageBlock(REF, data="aGk="))
    assert not is_default(ImageBlock(REF, data="Ynll"))
    assert ImageBlock(REF, data="aGk=") == ImageBlock(REF, data="Ynll")


def test_other_types_are_written_whole():
    @dataclasses.dataclass
    class Shape:
        kind: Literal["circle"] = "circle"
        radius: float = 1.0

    class Point(BaseModel):
        kind: Literal["point"] = "point"
        x: int = 0

    assert payload_json(Shape()) == {"kind": "circle", "radius": 1.0}
    assert payload_json(Point()) == {"kind": "point", "x": 0}
    # ...and so are they inside Noeta's own types.
    validated = activity_io.ValidateOutput(ok=True, data=Shape())
    assert payload_json(validated) == {"ok": True, "data": {"kind": "circle", "radius": 1.0}}


def test_a_task_input_and_its_carry_survive_the_trip():
    task = TaskInput(goal="g", provider="p", tools=["a"], carry=Carry(head=REF, turn=3, goal_ids={"x": 1}))
    assert round_trip(task) == task
    assert len(converter.to_payloads([task])[0].data) < len(to_json(task)) / 2


def test_activity_inputs_at_their_defaults_decode_exactly():
    budget = AttemptBudget(max_retries=3)
    inputs = [
        activity_io.CallModelInput(task_id="t", provider="p", model=None, head=None, append=[], system_ref=None,
                                   tools=[], turn=1, budget=budget, step_key="k"),
        activity_io.InvokeToolInput(task_id="t", call_id="c", tool_name="x", arguments={"a": None},
                                    expected_fingerprint=None, budget=budget),
        activity_io.PrepareInput(task_id="t", tools=[], expected_fingerprints={}, system_prompt=None),
        activity_io.LoadTranscriptInput(head=None),
        activity_io.ReleaseOutput(released=[]),
    ]
    for value in inputs:
        assert round_trip(value) == value


# -- the pinned defaults -------------------------------------------------------------------------


def wire_defaults() -> dict[str, Any]:
    """``module.Class.field``: its default as JSON, for every defaulted field of every Noeta
    dataclass that a payload can hold."""
    classes = {
        f"{schema['cls'].__module__}.{schema['cls'].__qualname__}": schema["cls"]
        for root in PAYLOAD_ROOTS for schema in noeta_dataclass_schemas(type_adapter(root).core_schema)
    }
    table: dict[str, Any] = {}
    for name, cls in sorted(classes.items()):
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                table[f"{name}.{f.name}"] = json.loads(to_json(f.default))
            elif f.default_factory is not dataclasses.MISSING:
                table[f"{name}.{f.name}"] = json.loads(to_json(f.default_factory()))
    return table


def test_wire_defaults_never_change():
    pinned = json.loads(WIRE_DEFAULTS.read_text())
    current = wire_defaults()
    changed = {k: (pinned[k], current.get(k, "<no default>")) for k in pinned if current.get(k, "<no default>") != pinned[k]}
    assert not changed, (
        f"defaults recorded histories rely on have changed (pinned, now): {changed}. A payload left such a "
        "field out because it held the pinned default; keep the default, or add a new field instead"
    )
    added = sorted(set(current) - set(pinned))
    assert not added, f"new defaulted fields {added}: pin them with `python -m tests.test_compact_payloads`"


if __name__ == "__main__":
    pinned = json.loads(WIRE_DEFAULTS.read_text()) if WIRE_DEFAULTS.exists() else {}
    current = wire_defaults()
    if any(current.get(k, "<no default>") != v for k, v in pinned.items()):
        sys.exit("a pinned default changed; refusing to overwrite (see this module's docstring)")
    WIRE_DEFAULTS.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    print(f"{len(current)} defaults pinned in {WIRE_DEFAULTS}")
