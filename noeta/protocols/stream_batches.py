"""The wire forms of a model call's streamed pieces on their way through the task's workflow
stream: the batch the model-call activity signals (``SIGNAL_STREAM_BATCH``, recorded in history)
and the stream item the workflow keeps and readers poll (never in history).

The batch is one JSON object, the signal's only argument (the data converter writes compact UTF-8
JSON): ``{"i": publisher, "n": batch number, "c": call_id, "a": attempt, "s": seq of the first
piece, "t": the pieces' texts joined, "l": their lengths, "k": their kinds, "e": 1}``. ``e`` marks
the last batch of a call attempt (its end: every piece of the attempt is in this batch or before
it); a batch without it is followed by another of the same attempt, unless the attempt was
cancelled, its worker was lost, or it was published by a worker of a release before the mark. ``l`` holds one
character per piece, its length in :data:`_DIGITS` (``~LENGTH.`` in decimal from 64 characters on),
so a piece of a few characters costs one byte more than its text instead of three (two quotes and
a comma); ``k`` holds one letter per piece (:data:`_KIND_LETTERS`) and is left out when every piece
is text. Every piece stays as the provider sent it, so its ``seq`` is the same as in a worker's
sink or a broker (a client that gets both delivers each once).

The item: ``{"c", "a", "s", "p": pieces, "e": 1}``, a piece being its text (kind "text") or
``[kind, text]`` — the form readers have always read (``e`` as in the batch, left out when unset).

Both the workflow and a reader of history (which sees every batch signal the workflow saw, in the
same order) number the stream's items the same way: one offset per batch taken, a batch sent twice
(:class:`SeenBatches`) taken once.

Why not the stream's own publish signal: it wraps each item as a base64-encoded payload inside a
JSON list, which made the text a third longer and added ~200 bytes to every batch in history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Publishers whose last batch number is remembered (each model-call attempt is one publisher).
PUBLISHERS_KEPT = 32
#: A piece's length, one character, when under 64 (JSON writes these as they are).
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
_LONG, _LONG_END = "~", "."
#: A piece's kind as one letter in ``k``.
_KIND_LETTERS = {"text": "t", "thinking": "h", "tool_use": "u"}
_KINDS = {letter: kind for kind, letter in _KIND_LETTERS.items()}


def _lengths(texts: Sequence[str]) -> str:
    return "".join(_DIGITS[n] if n < len(_DIGITS) else f"{_LONG}{n}{_LONG_END}" for n in (len(t) for t in texts))


def _split(joined: str, lengths: str) -> list[str] | None:
    """The texts ``joined`` holds by ``lengths``; None when they do not add up."""
    texts, at, i = [], 0, 0
    while i < len(lengths):
        if lengths[i] == _LONG:
            end = lengths.find(_LONG_END, i)
            digits = lengths[i + 1:end] if end > i else ""
            if not digits or any(c not in "0123456789" for c in digits):
                return None
            n, i = int(digits), end + 1
        else:
            n = _DIGITS.find(lengths[i])
            if n < 0:
                return None
            i += 1
        texts.append(joined[at:at + n])
        at += n
    return texts if at == len(joined) else None


@dataclass(frozen=True, slots=True)
class CallPieces:
    """Consecutive pieces ``(kind, text)`` of one model call attempt, from seq ``first_seq``;
    ``end``: the attempt has no pieces after these."""

    call_id: str
    attempt: int
    first_seq: int
    pieces: list[tuple[str, str]] = field(default_factory=list)
    end: bool = False


def batch_body(publisher: str, number: int, call: CallPieces) -> dict[str, Any]:
    """The signal argument carrying ``call``'s pieces: batch ``number`` of ``publisher``."""
    texts = [text for _, text in call.pieces]
    body: dict[str, Any] = {"i": publisher, "n": number, "c": call.call_id, "a": call.attempt, "s": call.first_seq}
    body.update(t="".join(texts), l=_lengths(texts))
    if any(kind != "text" for kind, _ in call.pieces):
        body["k"] = "".join(_KIND_LETTERS[kind] for kind, _ in call.pieces)
    if call.end:
        body["e"] = 1
    return body


def item_json(call: CallPieces) -> bytes:
    """A stream item's bytes: ``call``'s pieces."""
    wire = [text if kind == "text" else [kind, text] for kind, text in call.pieces]
    item: dict[str, Any] = {"c": call.call_id, "a": call.attempt, "s": call.first_seq, "p": wire}
    if call.end:
        item["e"] = 1
    return json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()


def checked_batch(body: Any) -> tuple[str, int, CallPieces] | None:
    """``(publisher, number, pieces)`` of a signalled batch, or None when it is not one (bad input
    is dropped by the workflow, never a failed workflow task)."""
    if not isinstance(body, dict):
        return None
    publisher, call_id, joined, lengths = (body.get(k) for k in ("i", "c", "t", "l"))
    if not all(isinstance(v, str) for v in (publisher, call_id, joined, lengths)):
        return None
    counts = [v for v in (body.get(k) for k in "nas") if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    texts = _split(str(joined), str(lengths))
    letters = body.get("k", "t" * len(texts or ()))
    if len(counts) != 3 or texts is None or not isinstance(letters, str) or len(letters) != len(texts):
        return None
    if any(letter not in _KINDS for letter in letters):
        return None
    pieces = [(_KINDS[letter], text) for letter, text in zip(letters, texts, strict=True)]
    call = CallPieces(str(call_id), counts[1], counts[2], pieces, end=body.get("e") == 1)
    return str(publisher), counts[0], call


def item_pieces(data: bytes) -> CallPieces:
    """The pieces of a stream item; raises ValueError, KeyError, TypeError or IndexError for bytes
    that are not one."""
    body = json.loads(data)
    pieces = [("text", p) if isinstance(p, str) else (str(p[0]), str(p[1])) for p in body["p"]]
    return CallPieces(str(body["c"]), int(body["a"]), int(body["s"]), pieces, end=body.get("e") == 1)


class SeenBatches:
    """The batches a stream has taken, by publisher: a batch whose signal was sent again (it may
    have landed the first time) is taken once. Remembers the last PUBLISHERS_KEPT publishers."""

    def __init__(self) -> None:
        """Nothing seen yet (each run of a task starts afresh)."""
        self._last: dict[str, int] = {}

    def first_time(self, publisher: str, number: int) -> bool:
        """False for a publisher's batch that already landed; an unnamed publisher's always counts."""
        if not publisher:
            return True
        last = self._last.get(publisher)
        if last is not None and number <= last:
            return False
        self._last.pop(publisher, None)
        self._last[publisher] = number
        while len(self._last) > PUBLISHERS_KEPT:
            del self._last[next(iter(self._last))]
        return True


__all__ = ["PUBLISHERS_KEPT", "CallPieces", "SeenBatches", "batch_body", "checked_batch", "item_json", "item_pieces"]
