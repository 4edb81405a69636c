"""Every module the docs cite exists: each ``core/…``, ``adapters/…``, ``gateway/…``,
``tests/…``, ``bench/…`` or ``docs/…`` path in README.md and docs/*.md names a file or
directory of the repository (a ``*`` in it is a glob that must match something), and each
dotted ``gateway.x.y`` (``core.``, ``adapters.``) names a module, or a name defined in
one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
TOPS = "core|adapters|gateway|tests|bench|docs"
PATH = re.compile(rf"(?<![\w./:-])((?:{TOPS})/[\w./*-]*[\w/*])")
DOTTED = re.compile(r"(?<![\w./:-])((?:core|adapters|gateway)(?:\.[a-z_]\w*)++)(?![\w/-])")
"""A dotted module name, not a host name (``core.telegram.org/bots``)."""


def cited_paths(text: str) -> list[str]:
    return [m.group(1).rstrip("/.") for m in PATH.finditer(text) if "<" not in m.group(1)]


def path_exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def module_of(parts: list[str]) -> tuple[Path, int] | None:
    """The longest importable prefix of ``parts``: its source file and its length."""
    for length in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:length])
        for source in (base.with_suffix(".py"), base / "__init__.py"):
            if source.is_file():
                return source, length
    return None


def dotted_exists(name: str) -> bool:
    parts = name.split(".")
    found = module_of(parts)
    if found is None:
        return False
    source, length = found
    rest = parts[length:]
    if not rest:
        return True
    defined = re.compile(rf"^\s*(?:async def|def|class)?\s*{re.escape(rest[0])}\b", re.M)
    return bool(defined.search(source.read_text(encoding="utf-8")))


def missing() -> list[str]:
    problems: list[str] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        where = doc.relative_to(ROOT)
        problems += [f"{where}: {p}" for p in cited_paths(text) if not path_exists(p)]
        dotted = {m.group(1) for m in DOTTED.finditer(text)}
        problems += [f"{where}: {d}" for d in sorted(dotted) if not dotted_exists(d)]
    return problems


def test_every_cited_path_and_module_exists() -> None:
    assert missing() == []


def test_a_path_or_module_that_does_not_exist_is_found() -> None:
    assert cited_paths("see `gateway/no_such_module.py` and core/agent/") == [
        "gateway/no_such_module.py",
        "core/agent",
    ]
    assert not path_exists("gateway/no_such_module.py")
    assert path_exists("core/agent") and path_exists("tests/test_store*.py")
    assert not dotted_exists("gateway.no_such_module")
    assert not dotted_exists("gateway.config.no_such_name")
    assert dotted_exists("gateway.config.load_config") and dotted_exists("core.agent")
