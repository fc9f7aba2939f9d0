"""The wire forms of a model call's streamed pieces on their way through the task's workflow
stream: the batch the model-call activity signals (``SIGNAL_STREAM_BATCH``, recorded in history)
and the stream item the workflow keeps and readers poll (never in history).

The batch is one JSON object, the signal's only argument (the data converter writes compact UTF-8
JSON): ``{"i": publisher, "n": batch number, "c": call_id, "a": attempt, "s": seq of the first
piece, "t": the pieces' texts joined, "l": their lengths, "k": their kinds}``. ``l`` holds one
character per piece, its length in :data:`_DIGITS` (``~LENGTH.`` in decimal from 64 characters on),
so a piece of a few characters costs one byte more than its text instead of three (two quotes and
a comma); ``k`` holds one letter per piece (:data:`_KIND_LETTERS`) and is left out when every piece
is text. Every piece stays as the provider sent it, so its ``seq`` is the same as in a worker's
sink or a broker (a client that gets both delivers each once).

The item: ``{"c", "a", "s", "p": pieces}``, a piece being its text (kind "text") or
``[kind, text]`` — the form readers have always read.

Why not the stream's own publish signal: it wraps each item as a base64-encoded payload inside a
JSON list, which made the text a third longer and added ~200 bytes to every batch in history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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


def batch_body(
    publisher: str, number: int, call_id: str, attempt: int, first_seq: int, pieces: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """The signal argument carrying ``pieces`` ``(kind, text)`` (from ``first_seq`` on) of one
    call attempt."""
    texts = [text for _, text in pieces]
    body: dict[str, Any] = {"i": publisher, "n": number, "c": call_id, "a": attempt, "s": first_seq}
    body.update(t="".join(texts), l=_lengths(texts))
    if any(kind != "text" for kind, _ in pieces):
        body["k"] = "".join(_KIND_LETTERS[kind] for kind, _ in pieces)
    return body


def item_json(call_id: str, attempt: int, first_seq: int, pieces: Sequence[tuple[str, str]]) -> bytes:
    """A stream item's bytes: ``pieces`` ``(kind, text)`` of one call attempt from ``first_seq``."""
    wire = [text if kind == "text" else [kind, text] for kind, text in pieces]
    return json.dumps({"c": call_id, "a": attempt, "s": first_seq, "p": wire}, ensure_ascii=False, separators=(",", ":")).encode()


def checked_batch(body: Any) -> tuple[str, int, str, int, int, list[tuple[str, str]]] | None:
    """``(publisher, number, call_id, attempt, first_seq, pieces)`` of a signalled batch, or None
    when it is not one (bad input is dropped by the workflow, never a failed workflow task)."""
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
    return str(publisher), counts[0], str(call_id), counts[1], counts[2], pieces


def item_pieces(data: bytes) -> tuple[str, int, int, list[tuple[str, str]]]:
    """``(call_id, attempt, first_seq, pieces)`` of a stream item; raises ValueError, KeyError,
    TypeError or IndexError for bytes that are not one."""
    body = json.loads(data)
    call_id, attempt, seq = str(body["c"]), int(body["a"]), int(body["s"])
    pieces = [("text", p) if isinstance(p, str) else (str(p[0]), str(p[1])) for p in body["p"]]
    return call_id, attempt, seq, pieces


__all__ = ["batch_body", "checked_batch", "item_json", "item_pieces"]
