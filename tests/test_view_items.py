"""``as_messages`` keeps the seed's six view types: a compaction is an InjectedMessage (origin
"system") where it happened, and a call an approver edited shows the arguments it ran with beside
the model's. Pure projections of hand-built envelopes (the live paths are in test_compaction and
test_console_browser)."""

from __future__ import annotations

import typing
from pathlib import Path

from noeta.cli.render import render
from noeta.client.messages import (
    AssistantMessage,
    ContextCompactedView,
    InjectedMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
    ViewItem,
    as_messages,
)
from noeta.context.content_store import LocalContentStore
from noeta.protocols import event_log as ev
from noeta.protocols.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage


def envelope(seq: int, payload: object) -> ev.EventEnvelope:
    return ev.EventEnvelope(seq, type(payload).__name__, "engine", None, "t", None, payload)  # type: ignore[arg-type]


def turn(n: int) -> list[object]:
    """Model turn ``n``: a call of ``fetch`` and its result."""
    call = f"c{n}"
    return [
        ev.MessagesAppended([Message("assistant", [ToolUseBlock(call, "fetch", {"n": n})])]),
        ev.MessagesAppended([Message("tool", [ToolResultBlock(call, f"chunk {n}", True)])]),
    ]


def test_view_item_is_the_seeds_six_types():
    assert typing.get_args(ViewItem) == (AssistantMessage, UserMessage, InjectedMessage, ToolUse, ToolResultView, Result)
    assert ContextCompactedView not in typing.get_args(ViewItem)  # importable, never produced


def test_a_compaction_is_an_injected_system_message_between_the_turns_it_folded(tmp_path: Path):
    compacted = ev.ContextCompacted(
        strategy="summarize", reason="threshold", tokens_before=9000, tokens_after=1200,
        turns_folded=2, messages_folded=4, summary="Summary 1: chunks 1 and 2 fetched",
    )
    payloads = [
        ev.MessagesAppended([Message("user", [TextBlock("fetch")])]), *turn(1), *turn(2), compacted, *turn(3),
        ev.TaskCompleted("done", "completed", Usage(), 4),
    ]
    items = as_messages([envelope(i + 1, p) for i, p in enumerate(payloads)], LocalContentStore(tmp_path))
    assert all(isinstance(i, typing.get_args(ViewItem)) for i in items)
    [mark] = [i for i in items if isinstance(i, InjectedMessage)]
    assert mark.origin == "system"
    assert mark.text.startswith("[context compacted (summarize, threshold): 2 turn(s) folded, turns 1-2 above; 9000 -> 1200 tokens]")
    assert mark.text.endswith("Summary 1: chunks 1 and 2 fetched")
    where = items.index(mark)
    assert [i.output for i in items[:where] if isinstance(i, ToolResultView)] == ["chunk 1", "chunk 2"]
    assert [i.output for i in items[where:] if isinstance(i, ToolResultView)] == ["chunk 3"]


def test_an_edited_call_shows_what_ran_and_what_was_proposed(tmp_path: Path):
    payloads = [
        ev.MessagesAppended([Message("assistant", [ToolUseBlock("c1", "issue_refund", {"amount": 250})])]),
        ev.ApprovalRequested("c1", "refunds", "over 100"),
        ev.ApprovalGranted("c1", "alice", None, "key", 3.0, arguments={"amount": 200}, proposed_arguments={"amount": 250}),
        ev.MessagesAppended([Message("tool", [ToolResultBlock("c1", "refunded 200", True)])]),
        ev.MessagesAppended([Message("assistant", [ToolUseBlock("c2", "issue_refund", {"amount": 10})])]),
        ev.ApprovalGranted("c2", "alice", None, "key", 1.0),
    ]
    items = as_messages([envelope(i + 1, p) for i, p in enumerate(payloads)], LocalContentStore(tmp_path))
    edited, plain = [i for i in items if isinstance(i, ToolUse)]
    assert (edited.arguments, edited.proposed_arguments, edited.edited) == ({"amount": 200}, {"amount": 250}, True)
    assert (plain.arguments, plain.proposed_arguments, plain.edited) == ({"amount": 10}, None, False)
    line = render(edited)
    assert line.startswith('tool call │ issue_refund({"amount": 200}) [c1]')
    assert line.endswith('edited by the approver, proposed issue_refund({"amount": 250})')


def test_python_dash_m_noeta_is_the_noeta_command():
    import runpy
    import sys
    from unittest import mock

    import pytest

    with mock.patch.object(sys, "argv", ["noeta", "--help"]), pytest.raises(SystemExit) as done:
        runpy.run_module("noeta", run_name="__main__")
    assert done.value.code == 0
