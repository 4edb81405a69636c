"""No import cycle among core/, adapters/ and gateway/ (issue 29 point 3), counting every
import: at module top, inside functions (lazy) and under ``if TYPE_CHECKING:``.

The graph is read from the source (``ast``), not from ``sys.modules``: a lazy or
type-only import is an edge too, since it is a dependency the reader must follow. A cycle
is a strongly connected component of more than one module. There is none: any cycle fails
(docs/architecture.md, "Layout")."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("core", "adapters", "gateway")


def module_files(root: Path, layers: Iterable[str]) -> dict[str, Path]:
    """Every module under ``layers`` of ``root``, by dotted name (a package by its name)."""
    found: dict[str, Path] = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the others: every ``import`` statement anywhere in it."""
    return {name: set(_imports(name, path, modules)) - {name} for name, path in modules.items()}


def _imports(name: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield from [full] if full in modules else _known(base, modules)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def _known(dotted: str, modules: Mapping[str, Path]) -> Iterator[str]:
    """The module ``dotted`` names, or its nearest enclosing one we have (none: a library)."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    if dotted:
        yield dotted


def cycles(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def _named(found: Iterable[frozenset[str]]) -> list[list[str]]:
    return sorted(sorted(c) for c in found)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The repository's import graph, read once for this module's tests."""
    return import_graph(module_files(ROOT, LAYERS))


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, f"import cycles (lazy and TYPE_CHECKING imports count): {_named(found)}"


def test_a_turn_service_and_cluster_port_are_in_no_cycle(graph: dict[str, set[str]]) -> None:
    """What ``TurnHost`` tied together (service <-> chat_turns <-> cluster/port)."""
    tied = {m for c in cycles(graph) for m in c}
    assert tied.isdisjoint({"gateway.service", "gateway.turns.runner", "gateway.cluster.port"})
    assert "gateway.service" not in graph["gateway.turns.runner"]
    assert "gateway.service" not in graph["gateway.cluster.port"]


def test_lazy_and_type_checking_imports_make_cycles(tmp_path: Path) -> None:
    """The check sees the imports a plain ``import`` at load time would not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def later():\n    from pkg.a import thing\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import d\n",
        "sub/__init__.py": "",
        "sub/d.py": "from ..c import x\n",
        "e.py": "import pkg.a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    found = cycles(import_graph(module_files(tmp_path, ["pkg"])))
    assert found == {frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.c", "pkg.sub.d"})}
