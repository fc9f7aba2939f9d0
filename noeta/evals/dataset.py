"""Datasets: the cases an agent is scored on, written in code or read from a JSONL or YAML file.

A case is a goal with what a right run looks like: the answer (``expected``), the structured output
(``expected_data``), the tool calls (``expected_tools``: names, or ``{"name": ..., "arguments":
{...}}``), and tags to slice a report by. Images are files (relative to the dataset file) or
ImageBlocks already stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information

from noeta.errors import ConfigurationError
from noeta.protocols.messages import ImageBlock

#: The keys a case may have in a dataset file.
CASE_KEYS = frozenset({"id", "goal", "images", "expected", "expected_data", "expected_tools", "tags", "metadata"})


@dataclass(frozen=True)
class ExpectedTool:
    """A tool call a right run makes: its name, and (when given) the arguments it must include."""

    name: str
    arguments: dict[str, Any] | None = None


@dataclass(frozen=True)
class Case:
    """One goal an agent is scored on, and what a right run looks like."""

    goal: str
    id: str = ""
    """Names the case in reports (``noeta eval`` numbers unnamed ones ``case-1``, ``case-2``...)."""
    images: Sequence[ImageBlock | str] = ()
    """Images sent with the goal: ImageBlocks, or image files (a dataset file's are relative to it)."""
    expected: str | None = None
    """The right answer (or the text it must contain, or the pattern it must match: per scorer)."""
    expected_data: Any = None
    """The right structured output (JSON values), compared field by field."""
    expected_tools: Sequence[str | ExpectedTool] = ()
    """The tool calls a right run makes, in order."""
    tags: Sequence[str] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """ConfigurationError for a blank goal or a tool that is neither a name nor an ExpectedTool."""
        if not isinstance(self.goal, str) or not self.goal.strip():
            raise ConfigurationError(f"case {self.id or '?'}: a case needs a goal")
        for tool in self.expected_tools:
            if not isinstance(tool, (str, ExpectedTool)):
                raise ConfigurationError(f"case {self.id or '?'}: expected_tools holds names or ExpectedTool, not {tool!r}")

    def tools(self) -> list[ExpectedTool]:
        """The expected tool calls, each as an ExpectedTool."""
        return [ExpectedTool(t) if isinstance(t, str) else t for t in self.expected_tools]


def case_of(raw: Mapping[str, Any], where: str, base: Path | None = None) -> Case:
    """A case from its dataset-file form (``where`` names it in errors; ``base``: the file's folder)."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where}: a case is an object with a goal, not {type(raw).__name__}")
    unknown = sorted(set(raw) - CASE_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown case keys {unknown}; a case has {sorted(CASE_KEYS)}")
    tools = []
    for tool in raw.get("expected_tools") or ():
        if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            tools.append(ExpectedTool(tool["name"], dict(tool["arguments"]) if tool.get("arguments") is not None else None))
        elif isinstance(tool, str):
            tools.append(ExpectedTool(tool))
        else:
            raise ConfigurationError(f"{where}: expected_tools holds names or {{name, arguments}}, not {tool!r}")
    images = [str(base / i) if base is not None and not Path(i).is_absolute() else str(i) for i in raw.get("images") or ()]
    return Case(
        goal=raw.get("goal", ""), id=str(raw.get("id") or ""), images=images, expected=raw.get("expected"),
        expected_data=raw.get("expected_data"), expected_tools=tools, tags=list(raw.get("tags") or ()),
        metadata=dict(raw.get("metadata") or {}),
    )


def load_dataset(source: str | Path | Iterable[Case | Mapping[str, Any]]) -> list[Case]:
    """The cases of a dataset: a ``.jsonl`` file (one case per line), a ``.yaml``/``.yml`` file (a
    list of cases, or ``{"cases": [...]}``), or cases given in code (Case objects or their dicts).
    Unnamed cases are named ``case-N`` by position; ConfigurationError for two cases of one id."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            text = path.read_text()
        except OSError as err:
            raise ConfigurationError(f"dataset {path}: {err.strerror or err}") from err
        raw = _parse(text, path)
        cases = [case_of(item, f"{path} case {n}", path.parent) for n, item in enumerate(raw, 1)]
    else:
        cases = [item if isinstance(item, Case) else case_of(item, f"case {n}") for n, item in enumerate(source, 1)]
    named = [c if c.id else _with_id(c, f"case-{n}") for n, c in enumerate(cases, 1)]
    ids = [c.id for c in named]
    doubles = sorted({i for i in ids if ids.count(i) > 1})
    if doubles:
        raise ConfigurationError(f"dataset: case ids must be unique, these repeat: {doubles}")
    if not named:
        raise ConfigurationError("dataset: no cases")
    return named


def _parse(text: str, path: Path) -> list[Any]:
    if path.suffix == ".jsonl":
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as err:
            raise ConfigurationError(f"dataset {path}: a line is not JSON: {err}") from err
    if path.suffix in (".yaml", ".yml", ".json"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigurationError(f"dataset {path}: not YAML: {err}") from err
        if isinstance(data, Mapping):
            data = data.get("cases")
        if not isinstance(data, list):
            raise ConfigurationError(f"dataset {path}: a list of cases, or an object with `cases`")
        return data
    raise ConfigurationError(f"dataset {path}: a .jsonl, .yaml or .yml file")


def _with_id(case: Case, case_id: str) -> Case:
    return replace(case, id=case_id)
