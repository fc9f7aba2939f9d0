"""Messages, content blocks and the provider interface (seed: "Provider 的请求与响应", "内容块").

Pure data: every type here is a frozen dataclass that Temporal's pydantic data converter carries
through history unchanged. Union members carry a ``type`` tag so a union decodes to the right class.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Literal, Protocol, Union, runtime_checkable

from pydantic import Field

Role = Literal["system", "user", "assistant", "tool"]
Origin = Literal["human", "system", "memory"]
StopReason = Literal["tool_use", "end_turn", "max_tokens", "error"]


@dataclass(frozen=True, slots=True)
class ContentRef:
    """A reference to a body kept in a ContentStore. Lookups use ``hash`` only."""

    hash: str
    """Hex sha256 of the bytes."""
    size: int
    """Size of the bytes."""
    media_type: str = "text/plain"
    """MIME type of the body, e.g. ``text/plain``, ``image/png``, ``application/json``."""
    type: Literal["ref"] = field(default="ref", kw_only=True)


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain assistant or user text."""

    text: str
    type: Literal["text"] = field(default="text", kw_only=True)


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image input for ``start`` / ``send_goal`` / ``query(images=...)`` (``noeta.sdk.image``
    stores the bytes and makes one). History keeps only the reference."""

    source: ContentRef
    data: str | None = field(default=None, kw_only=True, compare=False, repr=False)
    """Base64 of the bytes, filled in only on the request a provider receives."""
    type: Literal["image"] = field(default="image", kw_only=True)


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """The model asks for a tool call."""

    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    type: Literal["tool_use"] = field(default="tool_use", kw_only=True)


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The answer to a :class:`ToolUseBlock`.

    ``output`` is the text itself, or a :class:`ContentRef` when the body is large and lives in the
    content store (history keeps only the reference).
    """

    call_id: str
    output: str | ContentRef | None
    success: bool
    error: str | None = None
    images: list[ImageBlock] | None = None
    type: Literal["tool_result"] = field(default="tool_result", kw_only=True)


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """The model's reasoning before its answer (extended thinking), kept in the transcript because
    a provider may need it back: Anthropic wants the thinking blocks of an assistant turn, signed,
    sent again with that turn's tool results. Not part of the answer (``Message.text`` skips it)."""

    thinking: str = ""
    signature: str | None = None
    """The provider's signature over ``thinking`` (required to send it back)."""
    redacted: str | None = None
    """An encrypted thinking block (Anthropic ``redacted_thinking``): sent back as it came."""
    type: Literal["thinking"] = field(default="thinking", kw_only=True)


Block = Annotated[
    Union[TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock], Field(discriminator="type")
]


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a transcript.

    ``origin`` is written only by the engine's recording path: a marker forged inside model or tool
    output is just text.
    """

    role: Role
    content: list[Block]
    origin: Origin | None = None

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The message's tool-use blocks, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counters folded over a task. Cached and uncached input are counted apart so that a
    stable-prefix cache is measurable."""

    uncached: int = 0
    """Input tokens billed at full price."""
    cache_read: int = 0
    """Input tokens served from the provider's KV cache."""
    cache_write: int = 0
    """Input tokens written to that cache."""
    output: int = 0
    """Generated tokens."""
    reasoning_tokens: int = 0
    """Thinking tokens, where the provider reports them."""
    cost_usd: float = 0.0
    """What these tokens cost in US dollars, priced by the worker's price table when the call
    finished (0 when the model has no price; see docs/budgets.md). Providers leave it at 0."""

    @property
    def input(self) -> int:
        """Every input token: uncached plus cache reads and writes."""
        return self.uncached + self.cache_read + self.cache_write

    @property
    def visible_output(self) -> int:
        """The user-facing answer size: output minus reasoning."""
        return max(0, self.output - self.reasoning_tokens)

    def __add__(self, other: "Usage") -> "Usage":
        """Both counters added up, cost included."""
        return Usage(
            uncached=self.uncached + other.uncached,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            output=self.output + other.output,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """What a provider receives. ``tools`` are provider-shaped schema dicts."""

    model: str | None
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    effort: str | None = None
    timeout_seconds: float | None = None
    """How long the call may take: the worker sets what is left of the model call's attempt
    (``model_activity.start_to_close_seconds``); HTTP providers use it instead of their own timeout."""


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What a provider returns. ``raw`` is the vendor payload, unchanged."""

    stop_reason: StopReason
    content: list[Block]
    usage: Usage = field(default_factory=Usage)
    raw: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The concatenated text blocks of the response."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@runtime_checkable
class LLMProvider(Protocol):
    """An LLM behind ``complete``. Mounted with ``Options.provider`` / ``query(provider=...)``.

    ``complete`` may be sync (``def``, run on a worker thread) or async (``async def``, as every
    built-in provider); Noeta calls it inside a retried activity.
    """

    def complete(self, request: LLMRequest) -> LLMResponse | Awaitable[LLMResponse]:
        """Answer ``request``; a failure is a ProviderError (its ``retryable`` says whether to try
        again; ContextLengthError when the context is too long)."""


def registry_name(provider: LLMProvider) -> str:
    """The name a provider object is registered under: its ``name`` attribute or its class name."""
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) and name else type(provider).__name__


def provider_system(provider: LLMProvider) -> str:
    """Who serves a provider's calls, as OpenTelemetry's ``gen_ai.provider.name`` names it
    ("openai", "anthropic", "local", "fake"...): its ``provider_system`` attribute, else (a
    provider of the user's own that declares none) its registry name; declare ``provider_system``
    so that spans and metrics carry a provider's name rather than a class name."""
    system = getattr(provider, "provider_system", None)
    return system if isinstance(system, str) and system else registry_name(provider)


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a streamed response, delivered to ``HostConfig.delta_sink``.

    ``attempt`` is the activity attempt that produced it, so a consumer can drop the partial text of
    a failed attempt; ``seq`` numbers the deltas of one attempt from 0, so a consumer can check
    that none is missing or out of order.
    """

    task_id: str
    call_id: str
    attempt: int
    text: str = ""
    kind: Literal["text", "thinking", "tool_use"] = "text"
    seq: int = 0
    offset: int | None = None
    """Where the piece is in the task's delta stream: the offset of the batch it was published in
    (the pieces of one batch share it; ``Client.deltas(task_id, after=offset)`` starts with that
    batch, ``after=delta`` after this piece); None when it came another way (a worker's own sink, a
    broker)."""
    final: bool = False
    """The last piece of its attempt: the end mark of that model call attempt's pieces (when every
    piece had been published before the call ended, an empty piece carries it). Set on pieces read
    from the task's workflow stream."""


DeltaCallback = Callable[[str, str], Any]
"""``on_delta(kind, text)``: kind is "text", "thinking" or "tool_use" (partial JSON arguments)."""


@runtime_checkable
class StreamingProvider(LLMProvider, Protocol):
    """A provider that can also stream: ``stream`` calls ``on_delta`` for each piece as it arrives
    and returns the final :class:`LLMResponse`, which is all that history records. The worker
    streams whenever someone may take the pieces (docs/streaming.md)."""

    async def stream(self, request: LLMRequest, on_delta: DeltaCallback) -> LLMResponse:
        """Answer ``request`` as ``complete`` does, calling ``on_delta(kind, text)`` for each piece
        as it arrives."""
