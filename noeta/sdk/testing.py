"""Deterministic, network-free test doubles. Production code never imports this module."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from noeta.protocols.messages import LLMRequest, LLMResponse


@dataclass
class FakeLLMProvider:
    """A scripted provider with the seed's three fields.

    ``responses`` are returned in order; once they run out ``complete`` raises IndexError, so a
    runaway test fails loudly instead of looping on the last response. ``responder``, when given,
    answers instead (route by request content when tasks run concurrently: the script position
    depends on call order). ``complete`` is thread-safe; the responder runs outside the lock so a
    deliberately blocking responder does not serialize its own callers.

    It registers as "FakeLLMProvider"; register two under names of their own with
    ``Registry.of(providers={"a": fake_a, "b": fake_b})``.
    """

    responses: list[LLMResponse] = field(default_factory=list)
    received_requests: list[LLMRequest] = field(default_factory=list)
    responder: Callable[[LLMRequest], LLMResponse] | None = None

    def __post_init__(self) -> None:
        """Set up the lock and the script position that ``complete`` shares between threads."""
        # Plain attributes, not dataclass fields: the seed's dataclass has exactly three fields.
        self._lock = threading.Lock()
        self._position = 0

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Record ``request`` and answer with the next scripted response (or the responder's)."""
        with self._lock:
            self.received_requests.append(request)
            if self.responder is None:
                if self._position >= len(self.responses):
                    raise IndexError(
                        f"FakeLLMProvider script exhausted after {len(self.responses)} response(s)"
                    )
                response = self.responses[self._position]
                self._position += 1
                return response
        return self.responder(request)


__all__ = ["FakeLLMProvider"]
