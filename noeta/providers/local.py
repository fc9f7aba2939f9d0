"""The embedded default model: a tool router and a small text model behind one provider.

Used when no API key is configured, so ``noeta run "goal"`` works offline and really uses tools.
Two local models, each doing what it is good at:

- :mod:`noeta.providers.needle_router` (Needle 3, 121M parameters) decides the tool calls: when the
  newest message is the user's text and the request has tools, it picks tools and fills their
  arguments from that text. Calls are kept only if the tool exists, the arguments pass its
  ``input_schema`` and the router is confident enough; then the response is ``tool_use``.
- :mod:`noeta.providers._local_intents` reads the built-in tools' arguments from the text by rules
  (whole expressions, quoted text, file names, time questions): where a rule fires, its call
  replaces the router's for that tool, and is made even when the router was unsure.
- :mod:`noeta.providers.local_text` (SmolLM2-135M-Instruct on llama.cpp) writes the text: after
  tool results it answers the question from them; with no tool call it just chats.

A 135M model can drift away from the facts it is given, so an answer written after tool results is
kept only if it states every result; otherwise the provider answers with the results themselves
(``raw["writer"]`` keeps what the model wrote, ``raw["fallback"]`` says it happened). Nor does it
answer a question that needs a tool's result it does not have (a sum, a count of words, a file, the
time, with that tool missing or its argument unreadable): it says which tool it would need
(``raw["no_tool_result"]``) instead of letting the text model make the result up. Every decision
is recorded in the response's ``raw`` (router confidence, dropped calls, the rules' calls).

Deterministic: greedy decoding in both models, no date in the router's prompt, call ids derived
from the transcript, argument rules that are pure functions of the text. Concurrency-safe: the
router serialises its engine with a lock; the text server has one slot, so concurrent requests
queue.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

from noeta.protocols.messages import (
    ContentRef,
    DeltaCallback,
    LLMRequest,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers import _local_intents, local_text, needle_router
from noeta.providers._base import emit
from noeta.providers.local_text import MODEL_ALIAS, ensure_server, model_path, stop
from noeta.providers.openai import OpenAIProvider

__all__ = ["MODEL_ALIAS", "LocalModelProvider", "ensure_server", "mentions", "model_path", "stop"]

ROUTER_MODEL = "needle3"
#: A chat answer without ``max_tokens`` stops here: the small model otherwise rambles.
DEFAULT_MAX_TOKENS = 256
ANSWER_MAX_TOKENS = 96
#: How much of a tool's output the writer sees (its context is 4096 tokens).
RESULT_CHARS = 1500
WRITER_SYSTEM = (
    "You answer the user's question using the tool results. "
    "Reply with one short sentence that states the result exactly as the tool returned it."
)
#: Worked examples shown before the real question: the 135M writer copies their shape (measured in
#: bench/local_model.py: without them it states the result far less often).
WRITER_EXAMPLES = (
    ("What is 6 * 7?", "calculator", "42", "6 * 7 is 42."),
    ("Read the file plan.txt", "read_file", "Meet Bob on Monday.", "plan.txt says: Meet Bob on Monday."),
    ("What time is it?", "current_time", "2025-01-02 10:00:00 UTC", "It is 2025-01-02 10:00:00 UTC."),
)


def _writer_prompt(question: str, facts: list[tuple[str, str, str]]) -> str:
    lines = [f"Question: {question}"]
    lines += [f"Tool {name} {verb}: {output[:RESULT_CHARS]}" for name, verb, output in facts]
    return "\n".join([*lines, "Answer:"])


def _writer_messages(question: str, facts: list[tuple[str, str, str]]) -> list[Message]:
    messages = []
    for q, name, output, answer in WRITER_EXAMPLES:
        messages.append(Message("user", [TextBlock(_writer_prompt(q, [(name, "returned", output)]))]))
        messages.append(Message("assistant", [TextBlock(answer)]))
    messages.append(Message("user", [TextBlock(_writer_prompt(question, facts))]))
    return messages


def _normal(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.lower())  # 3,367 -> 3367
    return " ".join(text.split()).strip(" .!")


def mentions(answer: str, result: str) -> bool:
    """Whether ``answer`` states ``result`` (the whole result when short, else its first line), as
    whole words: "4" is not found in "144"."""
    wanted = _normal(result)
    if len(wanted) > 120:
        wanted = _normal(next((line for line in result.splitlines() if line.strip()), ""))[:120]
    if not wanted:
        return False
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", _normal(answer)) is not None


def _output_text(block: ToolResultBlock) -> str:
    body = block.output if block.success else (block.error or block.output)
    if isinstance(body, ContentRef) or body is None:
        return "" if body is None else f"<{body.size} bytes>"
    return body


def _goal(messages: list[Message]) -> str:
    """The newest user text (the question the tools were called for)."""
    for message in reversed(messages):
        if message.role == "user" and message.text.strip():
            return message.text
    return ""


def _text_only(messages: list[Message]) -> list[Message]:
    """The conversation as the text model can read it (its template has no tool turns)."""
    kept = []
    for m in messages:
        texts = [b for b in m.content if isinstance(b, TextBlock)]
        if texts and m.role in ("user", "assistant"):
            kept.append(Message(m.role, list(texts)))
    return kept


async def _in_one_piece(response: LLMResponse, on_delta: DeltaCallback | None) -> LLMResponse:
    """A response decided before it is shown, streamed as one piece."""
    if on_delta is not None:
        await emit(on_delta, "text", response.text)
    return response


def _without_result(needed: list[str], tools: list[dict[str, Any]]) -> LLMResponse:
    """The answer to a question that needs a tool's result the provider did not get: which tool,
    and why it was not called, instead of a result made up by the text model."""
    served = {t.get("name") for t in tools}
    missing = [name for name in needed if name not in served]
    if missing:
        text = (f"I cannot answer that without the {' and '.join(missing)} tool"
                f"{'s' if len(missing) > 1 else ''}, which this task does not have, so I have no result to give.")
    else:
        hints = {_local_intents.WORD_COUNT: "put the text in quotes", _local_intents.CALCULATOR: "write the expression "
                 "with numbers and operators", _local_intents.READ_FILE: "name the file, e.g. notes.txt"}
        text = (f"I could not tell what to give the {' and '.join(needed)} tool from that, so I have no result "
                f"to give; {'; '.join(hints.get(name, 'say it again') for name in needed)}.")
    return LLMResponse(stop_reason="end_turn", content=[TextBlock(text)], usage=Usage(),
                       raw={"no_tool_result": True, "needs": needed})


class LocalModelProvider:
    """The embedded default: Needle decides tool calls, SmolLM2 writes. See the module docstring."""

    provider_system = "local"
    """``gen_ai.provider.name`` of its calls."""

    def __init__(self, name: str = "local", timeout: float = 300, min_confidence: float = needle_router.MIN_CONFIDENCE):
        """``min_confidence`` is the router confidence below which the text model answers instead
        of a tool call. Raises ConfigurationError here, before any task starts, if a model is missing."""
        local_text.check_installed()
        needle_router.check_installed()
        self.name = name
        self.timeout = timeout  # generous: with one slot, concurrent calls wait for each other
        self.min_confidence = min_confidence
        self.model = f"needle+{MODEL_ALIAS}"  # what the task's NoetaModel shows
        self._delegate: OpenAIProvider | None = None

    def __repr__(self) -> str:
        """The provider's registered name (its models are fixed)."""
        return f"LocalModelProvider(name={self.name!r})"

    async def _writer(self) -> OpenAIProvider:
        base_url = local_text._base_url
        if base_url is None:
            base_url = await asyncio.to_thread(ensure_server)  # model loading blocks
        delegate = self._delegate
        if delegate is None or delegate.base_url != f"{base_url}/v1":
            # (Re)built after a stop()/restart, which picks a new port.
            delegate = OpenAIProvider(base_url=f"{base_url}/v1", api_key="", name=self.name, timeout=self.timeout)
            self._delegate = delegate
        return delegate

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Tool calls from the router and the rules, or text from the small model."""
        return await self._respond(request, None)

    async def stream(self, request: LLMRequest, on_delta: DeltaCallback) -> LLMResponse:
        """Chat answers stream piece by piece; an answer from tool results arrives as one piece
        (it is checked before it is shown); a tool call sends no text."""
        return await self._respond(request, on_delta)

    async def _respond(self, request: LLMRequest, on_delta: DeltaCallback | None) -> LLMResponse:
        last = request.messages[-1] if request.messages else None
        results = [b for b in last.content if isinstance(b, ToolResultBlock)] if last else []
        if results:
            return await _in_one_piece(await self._answer_from_results(request, results), on_delta)
        if last is not None and last.role == "user" and last.text.strip():
            if request.tools:
                routed = await self._route(request, last.text)
                if routed is not None:
                    return routed
            needed = _local_intents.needs(last.text)
            if needed:
                return await _in_one_piece(_without_result(needed, request.tools), on_delta)
        return await self._chat(request, on_delta)

    async def _route(self, request: LLMRequest, text: str) -> LLMResponse | None:
        decision = await asyncio.to_thread(needle_router.route, text, request.tools, self.min_confidence)
        by_name = {t["name"]: t for t in request.tools}
        ruled = [
            i for i in _local_intents.intents(text)
            if _local_intents.served(i, request.tools) and needle_router.valid_arguments(i.arguments, by_name[i.tool])
        ]
        raw: dict[str, Any] = {
            "router": ROUTER_MODEL,
            "confidence": decision.confidence,
            "dropped": [{"name": c.name, "arguments": c.arguments} for c in decision.dropped],
        }
        calls = [(c.name, c.arguments) for c in decision.calls]
        if ruled:
            # The rules read the built-in tools' arguments whole; the router keeps the other tools.
            raw["router_calls"] = [{"name": name, "arguments": arguments} for name, arguments in calls]
            raw["rules"] = [i.tool for i in ruled]
            calls = [(i.tool, i.arguments) for i in ruled] + [
                (name, arguments) for name, arguments in calls if name not in _local_intents.ARGUMENT
            ]
        if not calls:
            return None
        # Unique within the task and reproducible: the turn (or transcript length) and the position.
        turn = request.metadata.get("turn", len(request.messages))
        blocks = [
            ToolUseBlock(call_id=f"local-{turn}-{i}", tool_name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(calls, start=1)
        ]
        return LLMResponse(stop_reason="tool_use", content=list(blocks), usage=Usage(), raw=raw)

    async def _chat(self, request: LLMRequest, on_delta: DeltaCallback | None) -> LLMResponse:
        plain = replace(
            request,
            messages=_text_only(request.messages) or [Message("user", [TextBlock("Hello.")])],
            tools=[],
            temperature=0.0 if request.temperature is None else request.temperature,
            max_tokens=request.max_tokens or DEFAULT_MAX_TOKENS,
        )
        writer = await self._writer()
        return await (writer.complete(plain) if on_delta is None else writer.stream(plain, on_delta))

    async def _answer_from_results(self, request: LLMRequest, results: list[ToolResultBlock]) -> LLMResponse:
        calls = {u.call_id: u for m in request.messages for u in m.tool_uses}
        facts = []
        for block in results:
            use = calls.get(block.call_id)
            name = use.tool_name if use else "tool"
            verb = "returned" if block.success else "failed with"
            facts.append((name, verb, _output_text(block)))
        prompt = LLMRequest(
            model=request.model,
            system=WRITER_SYSTEM,
            messages=_writer_messages(_goal(request.messages), facts),
            temperature=0.0 if request.temperature is None else request.temperature,
            max_tokens=min(request.max_tokens or ANSWER_MAX_TOKENS, ANSWER_MAX_TOKENS),
        )
        written = await (await self._writer()).complete(prompt)
        text = written.text.strip()
        fallback = not text or not all(mentions(text, output) for _, _, output in facts if output)
        if fallback:
            text = "\n".join(f"{name} {verb}: {output[:RESULT_CHARS].strip()}" for name, verb, output in facts)
        raw = {"writer": written.text, "fallback": fallback}
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text)], usage=written.usage, raw=raw)

    def stop(self) -> None:
        """Stop the shared text server; the next call starts a new one."""
        stop()
