"""Finding the skills in the configured folders, and validating each.

A skill is a directory ``<dir>/<name>/`` holding ``SKILL.md``::

    ---
    name: pdf-forms
    description: Fill in PDF forms with the pdftk command line.
    ---
    (the instructions the ``skill`` tool returns)

Validation, so a skill folder is data and never a way in:

* ``name`` must equal the folder's name and be 1–64 of ``a-z``, ``0-9`` and ``-``, not
  starting or ending with ``-`` — no path, no markup, no prompt text in a name;
* ``description`` is one line of at most :data:`MAX_DESCRIPTION` characters;
* the folder and ``SKILL.md`` are real (not symbolic links), ``SKILL.md`` at most
  :data:`MAX_SKILL_BYTES`.

A skill that fails is skipped with one readable warning (:attr:`Catalog.warnings`); the
others load. The first of two skills with one name wins (earlier ``dirs`` first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

SKILL_FILE = "SKILL.md"
SANDBOX_ROOT = PurePosixPath("/skills")
"""Where a sandboxed terminal sees the skills: ``/skills/<name>/``, read-only."""
MAX_DESCRIPTION = 1024
MAX_SKILL_BYTES = 256 * 1024
MAX_LISTED_FILES = 100
NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z")
FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


class SkillError(ValueError):
    """Why one skill folder was not loaded (one line)."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: Path

    def body(self) -> str:
        """The instructions after the front matter, read now (the file may have changed)."""
        return parse(read_skill_file(self.folder))[2]

    def files(self) -> list[PurePosixPath]:
        """The files beside ``SKILL.md`` (relative, sorted; links not followed)."""
        found = [
            PurePosixPath(path.relative_to(self.folder).as_posix())
            for path in sorted(self.folder.rglob("*"))
            if path.is_file() and not path.is_symlink() and path.name != SKILL_FILE
        ]
        return found[:MAX_LISTED_FILES]


@dataclass(frozen=True, slots=True)
class Catalog:
    """The skills found, by name, and a warning per folder skipped."""

    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def only(self, names: Iterable[str] | None) -> dict[str, Skill]:
        """The skills a profile chose (None: all of them), in name order."""
        wanted = self.skills.keys() if names is None else set(names)
        return {name: self.skills[name] for name in sorted(wanted) if name in self.skills}


def load_catalog(dirs: Sequence[Path]) -> Catalog:
    """Every valid skill under ``dirs`` (a missing directory has none)."""
    skills: dict[str, Skill] = {}
    warnings: list[str] = []
    for folder in _skill_folders(dirs):
        try:
            skill = load_skill(folder)
        except SkillError as error:
            warnings.append(f"skill {folder} skipped: {error}")
            continue
        if skill.name in skills:
            first = skills[skill.name].folder
            warnings.append(f"skill {folder} skipped: {skill.name!r} is already {first}")
            continue
        skills[skill.name] = skill
    return Catalog(skills, tuple(warnings))


def _skill_folders(dirs: Sequence[Path]) -> list[Path]:
    folders: list[Path] = []
    for root in dirs:
        if root.is_dir():
            folders += [p for p in sorted(root.iterdir()) if p.is_dir() or p.is_symlink()]
    return [p for p in folders if not p.name.startswith(".")]


def load_skill(folder: Path) -> Skill:
    """The skill in ``folder``, or :class:`SkillError` saying why not."""
    if folder.is_symlink() or not folder.is_dir():
        raise SkillError("not a directory (symbolic links are not followed)")
    name, description, _ = parse(read_skill_file(folder))
    if name != folder.name:
        raise SkillError(f"name {name!r} differs from its folder's name {folder.name!r}")
    return Skill(name, description, folder)


def read_skill_file(folder: Path) -> str:
    path = folder / SKILL_FILE
    if path.is_symlink() or not path.is_file():
        raise SkillError(f"no {SKILL_FILE} (a regular file, not a link)")
    if path.stat().st_size > MAX_SKILL_BYTES:
        raise SkillError(f"{SKILL_FILE} is larger than {MAX_SKILL_BYTES} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as error:
        raise SkillError(f"{SKILL_FILE} cannot be read: {error}") from error


def parse(text: str) -> tuple[str, str, str]:
    """``(name, description, body)`` of a ``SKILL.md``'s text."""
    match = FRONT_MATTER.match(text.lstrip("\ufeff"))
    if match is None:
        raise SkillError(f"{SKILL_FILE} does not start with '---' front matter")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise SkillError(f"front matter is not valid YAML{line}") from error
    if not isinstance(meta, dict):
        raise SkillError("front matter must be a mapping with name and description")
    return _name(meta.get("name")), _description(meta.get("description")), match.group(2).strip()


def _name(value: object) -> str:
    if not isinstance(value, str) or NAME.match(value) is None:
        shown = repr(value)[:80]
        raise SkillError(f"name {shown} must be 1-64 of a-z, 0-9 and '-' (not at either end)")
    return value


def _description(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SkillError("description missing (a string saying when to use the skill)")
    text = " ".join(value.split())
    if len(text) > MAX_DESCRIPTION:
        raise SkillError(f"description has {len(text)} characters; at most {MAX_DESCRIPTION}")
    return text
