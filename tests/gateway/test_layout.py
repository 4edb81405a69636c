"""gateway/ grouped by the edge each module serves (issue 29 point 3): at most 8 modules at
the top (the composition), and a module imports another part of gateway/ only along an
allowed arrow (docs/architecture.md "Layout"). Every import counts: at module top, lazy
(inside a function) and under ``if TYPE_CHECKING:`` — the graph of
tests/gateway/test_import_cycles.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.gateway.test_import_cycles import import_graph, module_files

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"
TOP_LIMIT = 8

CONTRACT = "gateway.inbound.stages"
"""The inbound fold's types (``Stage``, ``Next``): any part may import them."""

ALLOWED: Mapping[str, frozenset[str]] = {
    "__main__": frozenset({"cli"}),
    "cli": frozenset({"app", "stores", "inbound", "control", "turns", "config"}),
    "app": frozenset({"wiring", "service", "stores", "telemetry", "cluster", "turns", "config"}),
    "wiring": frozenset(
        {"service", "schedule", "web", "cluster", "control", "turns", "outbound", "config"}
    ),
    "schedule": frozenset({"service", "web", "control", "turns", "outbound", "config"}),
    "web": frozenset({"service", "cluster", "inbound", "control", "turns", "outbound", "config"}),
    "cluster": frozenset({"service", "outbound", "config"}),
    "service": frozenset({"cluster", "inbound", "control", "turns", "outbound"}),
    "inbound": frozenset({"control", "turns", "outbound"}),
    "turns": frozenset({"control", "outbound", "config"}),
    "control": frozenset({"outbound", "config"}),
    "outbound": frozenset(),
    "stores": frozenset({"config"}),
    "telemetry": frozenset({"otel", "config"}),
    "otel": frozenset(),
    "config": frozenset(),
}
"""Part -> the parts it may import (its own modules always). A part is a folder of
gateway/ or a top module. ``config`` imports only core/ and adapters/; ``outbound`` no other
part; ``turns`` never inbound (its stop buttons and settings book are its own)."""


def part(module: str) -> str:
    """``gateway.turns.runner`` -> ``turns``; ``gateway.app`` -> ``app``."""
    return module.split(".")[1] if "." in module else "__init__"


def forbidden(graph: Mapping[str, set[str]]) -> list[str]:
    """Each import between gateway parts that no arrow of :data:`ALLOWED` permits."""
    found = []
    for module, imports in sorted(graph.items()):
        if not module.startswith("gateway."):
            continue
        source = part(module)
        for target in sorted(imports):
            if not target.startswith("gateway.") or target == CONTRACT:
                continue
            if part(target) not in {source, *ALLOWED.get(source, ())}:
                found.append(f"{module} -> {target}")
    return found


def test_gateway_top_holds_only_the_composition() -> None:
    top = sorted(path.name for path in GATEWAY.glob("*.py"))
    assert len(top) <= TOP_LIMIT, top


def test_every_gateway_part_has_its_arrows() -> None:
    parts = {path.stem for path in GATEWAY.glob("*.py")} | {
        path.name for path in GATEWAY.iterdir() if (path / "__init__.py").exists()
    }
    assert parts - {"__init__"} == set(ALLOWED)


def test_gateway_imports_follow_the_allowed_arrows() -> None:
    graph = import_graph(module_files(ROOT, ("core", "adapters", "gateway")))
    assert forbidden(graph) == []


def test_a_forbidden_arrow_is_found() -> None:
    graph = {
        "gateway.outbound.pipeline": {"gateway.turns.runner", CONTRACT},
        "gateway.turns.runner": {"gateway.outbound.pipeline", "gateway.inbound.dispatch"},
        "gateway.control.links": {CONTRACT, "core.text"},
    }
    assert forbidden(graph) == [
        "gateway.outbound.pipeline -> gateway.turns.runner",
        "gateway.turns.runner -> gateway.inbound.dispatch",
    ]
