"""Imports point down the layers of the package and form no circle.

Every import counts: at module level, inside functions, and under ``TYPE_CHECKING``. A lazy import
hides a dependency from the import system, not from the design: an activity that imports the client
"only when needed" still cannot be understood, tested or moved without it.

A module imported as ``pkg.sub`` counts as an import of ``pkg.sub`` only (not of ``pkg``, whose
``__init__`` Python runs too), so a package may re-export its submodules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "noeta"

#: The layers, lowest first: a module may import its own layer and the layers below it. The order
#: is DESIGN.md's (protocols < context < builtins/providers < activities < workflows < worker <
#: client < sdk/cli/http), with the packages and modules it does not name placed where they are
#: used (docs/design-decisions.md, "Layers"). ``noeta`` itself (the version) matches only exactly.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("noeta", "noeta.errors"),
    ("noeta.protocols",),
    ("noeta.config", "noeta.temporal.search_attributes"),
    ("noeta.security", "noeta.telemetry"),
    ("noeta.context", "noeta.deltas", "noeta.resources"),
    ("noeta.builtins", "noeta.providers", "noeta.mcp"),
    ("noeta.activities",),
    ("noeta.workflows",),
    ("noeta.worker", "noeta.temporal"),
    ("noeta.client",),
    ("noeta.sdk", "noeta.cli", "noeta.http", "noeta.evals", "noeta.__main__"),
)

#: Upward imports that are known, with the reason each may stay; an entry that no longer occurs
#: fails the test, so the list only shrinks.
ALLOWED_UPWARD: Mapping[tuple[str, str], str] = {
    ("noeta.client", "noeta.sdk"): "deprecated `from noeta.client import X` names forward to noeta.sdk, their public home",
}


@dataclass(frozen=True)
class Import:
    """One import statement's target inside the package."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.imported}"


def module_files(package: Path) -> dict[str, Path]:
    """Each module of ``package`` by dotted name (a package by its own name, not ``__init__``)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules`` (``pkg.mod.attr`` -> ``pkg.mod``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, importer: str, is_package: bool, modules: Mapping[str, Path]) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from filter(None, (_known(alias.name, modules) for alias in node.names))
    elif isinstance(node, ast.ImportFrom):
        if node.level:  # relative: from the importer's package, one level up per extra dot
            parts = importer.split(".") if is_package else importer.split(".")[:-1]
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, node.module] if node.module else parts)
        else:
            base = node.module or ""
        for alias in node.names:
            # `from pkg import sub` imports the submodule; `from mod import name` the module.
            target = _known(f"{base}.{alias.name}", modules) if f"{base}.{alias.name}" in modules else _known(base, modules)
            if target is not None:
                yield target


def package_imports(modules: Mapping[str, Path]) -> list[Import]:
    """Every import of one module of ``modules`` by another, wherever it is written."""
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for target in _targets(node, name, path.name == "__init__.py", modules):
                if target != name:
                    found.append(Import(name, target, getattr(node, "lineno", 0)))
    return found


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the entry that ``module`` is or lies under (the longest such entry)."""
    best: tuple[int, int] | None = None
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            inside = module == entry or (entry != "noeta" and module.startswith(entry + "."))
            if inside and (best is None or len(entry) > best[1]):
                best = (index, len(entry))
    return None if best is None else best[0]


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that can each reach the others through imports."""
    reach: dict[str, set[str]] = {}
    for start in edges:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        reach[start] = seen
    groups = {frozenset(n for n in reach[m] if m in reach.get(n, ())) | {m} for m in edges if m in reach[m]}
    return sorted(sorted(group) for group in groups if len(group) > 1)


def _graph(imports: Iterable[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for item in imports:
        edges.setdefault(item.importer, set()).add(item.imported)
        edges.setdefault(item.imported, set())
    return edges


MODULES = module_files(PACKAGE)
IMPORTS = package_imports(MODULES)


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if layer_of(m) is None)
    assert not unplaced, f"add these to LAYERS in tests/test_layers.py (and say why in docs): {unplaced}"


def test_imports_point_down() -> None:
    upward = sorted({
        str(item)
        for item in IMPORTS
        if (a := layer_of(item.importer)) is not None
        and (b := layer_of(item.imported)) is not None
        and b > a
        and (item.importer, item.imported) not in ALLOWED_UPWARD
    })
    assert not upward, "a lower layer imports a higher one:\n" + "\n".join(upward)


def test_allowed_upward_imports_still_exist() -> None:
    pairs = {(item.importer, item.imported) for item in IMPORTS}
    stale = [pair for pair in ALLOWED_UPWARD if pair not in pairs]
    assert not stale, f"remove from ALLOWED_UPWARD, they no longer occur: {stale}"


def test_no_import_circles() -> None:
    found = circles(_graph(IMPORTS))
    assert not found, "import circles (break each by moving the shared piece down):\n" + "\n".join(
        " <-> ".join(group) for group in found
    )


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import X\n"
    )
    (package / "high.py").write_text("def f():\n    from . import low\n    return low\n")
    (package / "other.py").write_text("import pkg.low\n")
    modules = module_files(package)
    imports = package_imports(modules)
    assert {(i.importer, i.imported) for i in imports} == {
        ("pkg.low", "pkg.high"), ("pkg.high", "pkg.low"), ("pkg.other", "pkg.low"),
    }
    assert circles(_graph(imports)) == [["pkg.high", "pkg.low"]]
