"""docs/architecture.md keeps up with gateway/: its components table (§2) has a row for
every module under ``gateway/`` (``__init__`` aside), each class a row names is defined
in that row's modules, and the inbound fold drawn in §3 lists the stages of
``gateway/inbound/stages.py``'s ``ORDER`` in that order."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.inbound.stages import ORDER

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MODULE = re.compile(r"`((?:gateway|core|adapters)/[\w/]+\.py)`")
CLASS = re.compile(r"`([A-Z][A-Za-z]+)`")
STAGE_LINE = re.compile(r"^ {3}([a-z_]+) +gateway/", re.M)


def components_table(text: str) -> list[tuple[str, str]]:
    """(part, module) cells of every row of §2's table."""
    section = text.split("## 2. Components", 1)[1].split("\n### ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    return [(cells[1], cells[2]) for cells in rows if len(cells) > 3]


def gateway_modules() -> set[str]:
    found = (ROOT / "gateway").rglob("*.py")
    return {str(p.relative_to(ROOT)) for p in found if p.name != "__init__.py"}


def unlisted(text: str) -> set[str]:
    listed = {m for _, module in components_table(text) for m in MODULE.findall(module)}
    return gateway_modules() - listed


def misnamed(text: str) -> list[str]:
    """Classes a row names that none of its modules defines."""
    wrong: list[str] = []
    for part, module in components_table(text):
        sources = [(ROOT / m).read_text(encoding="utf-8") for m in MODULE.findall(module)]
        for name in CLASS.findall(part):
            defined = re.compile(rf"^class {name}\b", re.M)
            if not any(defined.search(source) for source in sources):
                wrong.append(f"{name} in {module.strip()}")
    return wrong


def drawn_stages(text: str) -> list[str]:
    """The stage names of §3's drawing of the inbound fold, top to bottom."""
    section = text.split("4. **The inbound fold.**", 1)[1]
    drawing = section.split("```", 2)[1]
    return STAGE_LINE.findall(drawing)


def test_every_gateway_module_has_a_row() -> None:
    assert unlisted(ARCHITECTURE.read_text(encoding="utf-8")) == set()


def test_every_class_a_row_names_is_defined_in_its_module() -> None:
    assert misnamed(ARCHITECTURE.read_text(encoding="utf-8")) == []


def test_the_inbound_fold_is_drawn_in_its_order() -> None:
    assert drawn_stages(ARCHITECTURE.read_text(encoding="utf-8")) == list(ORDER)


def test_a_missing_row_a_wrong_class_and_a_wrong_order_are_found() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    without = text.replace("| `Router` | `gateway/inbound/dispatch.py` |", "| x | y |")
    assert unlisted(without) == {"gateway/inbound/dispatch.py"}
    renamed = text.replace("| `Router` |", "| `ClusterSink` |")
    assert misnamed(renamed) == ["ClusterSink in `gateway/inbound/dispatch.py`"]
    swapped = text.replace("   press  ", "   prezz  ")
    assert drawn_stages(swapped) != list(ORDER)
