"""An OpenAI Chat Completions server on 127.0.0.1 with a prefix cache and a context window, that
plays a fetching agent: each ordinary request gets a ``fetch_short(i)`` call until ``turns`` calls
were made, then the answer; a summarizing request (its last message is the compaction's
instruction) gets a summary.

Like OpenAI's automatic prompt caching, it reports as ``prompt_tokens_details.cached_tokens`` the
length of the longest common prefix (tools, then messages, in order) of the request with any
earlier one, a token per 4 characters; a request over ``window`` tokens gets OpenAI's 400 ("This
model's maximum context length is ... However, your messages resulted in ... tokens").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from noeta.protocols.compaction import SUMMARY_REQUEST
from tests.support.chat_server import FakeChatServer, Reply, completion, error_body

#: A long system prompt: what a prefix cache saves on every request of a real task.
SYSTEM_PROMPT = "You fetch chunks one by one and report what they hold. " + " ".join(
    f"Rule {i}: keep chunk numbers exact and never skip one." for i in range(40)
)


def prompt_text(body: dict[str, Any]) -> str:
    """What a prefix cache keys on: the tools, then every message, in the order they are sent."""
    return json.dumps(body.get("tools", []), sort_keys=True) + "".join(
        json.dumps(m, sort_keys=True) for m in body.get("messages", [])
    )


def is_summarizing(body: dict[str, Any]) -> bool:
    """Whether ``body`` is a compaction's summarizing request (the instruction is its last message)."""
    messages = body.get("messages") or [{}]
    return SUMMARY_REQUEST in str(messages[-1].get("content"))


@dataclass
class Answered:
    """One request as the server saw it and what it reported."""

    body: dict[str, Any]
    prompt_tokens: int
    cached_tokens: int
    refused: bool = False

    @property
    def summarizing(self) -> bool:
        return is_summarizing(self.body)


class PrefixCacheServer(FakeChatServer):
    """See the module; ``answered`` lists every request in order."""

    def __init__(self, turns: int, window: int | None = None) -> None:
        super().__init__()
        self.turns = turns
        self.window = window
        self.answered: list[Answered] = []
        self._prompts: list[str] = []
        self._fetches = 0

    def next_reply(self) -> Reply:
        body = self.seen[-1].body
        prompt = prompt_text(body)
        tokens = len(prompt) // 4
        cached = max((len(os.path.commonprefix([prompt, p])) for p in self._prompts), default=0) // 4
        if self.window is not None and tokens > self.window:
            self.answered.append(Answered(body, tokens, 0, refused=True))
            message = (f"This model's maximum context length is {self.window} tokens. However, your messages "
                       f"resulted in {tokens} tokens. Please reduce the length of the messages.")
            return Reply(400, error_body(message, "context_length_exceeded"))
        self._prompts.append(prompt)
        self.answered.append(Answered(body, tokens, cached))
        usage = {"prompt_tokens": tokens, "completion_tokens": 12, "total_tokens": tokens + 12,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        if is_summarizing(body):
            summary = f"Summary: chunks 1 to {self._fetches} were fetched; each held words."
            return Reply(body=completion({"content": summary}, usage=usage))
        if self._fetches >= self.turns:
            return Reply(body=completion({"content": f"fetched {self.turns} chunks"}, usage=usage))
        self._fetches += 1
        call = {"id": f"f{self._fetches}", "type": "function",
                "function": {"name": "fetch_short", "arguments": json.dumps({"i": self._fetches})}}
        return Reply(body=completion({"content": None, "tool_calls": [call]}, "tool_calls", usage))

    @property
    def ordinary(self) -> list[Answered]:
        """The task's own requests that were answered (not summarizing, not refused)."""
        return [a for a in self.answered if not a.summarizing and not a.refused]


__all__ = ["Answered", "PrefixCacheServer", "SYSTEM_PROMPT", "is_summarizing", "prompt_text"]
