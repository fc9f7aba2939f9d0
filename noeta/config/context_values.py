"""A context variable set for one ``with`` block: the settings' environment, the current run, the
owner of stored bodies and the like are each a ``ContextVar`` that code sets around a call. Python
3.14's ``with var.set(value):`` does the same; this serves the versions before it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def set_within(var: ContextVar[T], value: T) -> Iterator[None]:
    """``var`` is ``value`` inside the block (and in threads that copy this context), and what it
    was before once the block ends, however it ends."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
