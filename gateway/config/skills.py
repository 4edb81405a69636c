"""``[skills]``: where the operator's skills are (README "Skills", issue 32).

``dirs`` (default ``<data dir>/skills``) hold one folder per skill, each with a
``SKILL.md`` (:mod:`core.skills.catalog`). No directory, or none with a valid skill, and
skills are off: nothing of them is imported, no tool, no prompt text, no mount. A profile
chooses its skills with ``[profiles.<name>] skills = [...]`` (default: all of them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from adapters.config import PositiveInt, Section
from adapters.config_reader import Check, ReadContext, invalid, show

DEFAULT_DIR = "skills"
"""Under the data directory."""


def _paths(value: object, context: ReadContext) -> tuple[Path, ...]:
    """Directories; relative ones start at the config file's directory."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(
        isinstance(item, str) and item.strip() for item in items
    ):
        raise invalid(f"expected an array of directory paths, got {show(value)}")
    base = context.base_dir
    return tuple((base / Path(item).expanduser()).resolve() for item in items)


class SkillsSection(Section):
    dirs: Annotated[tuple[Path, ...], Check(_paths)] | None = None
    """Directories holding one folder per skill. Default: ``<data dir>/skills``."""
    prompt_chars: PositiveInt = 4000
    """The skills' names and descriptions in the stable prompt tier at most (characters)."""

    def folders(self, data_dir: Path) -> tuple[Path, ...]:
        return self.dirs if self.dirs is not None else (data_dir / DEFAULT_DIR,)

    def present(self, data_dir: Path) -> bool:
        """Whether any skills directory exists (else skills are off)."""
        return any(folder.is_dir() for folder in self.folders(data_dir))
