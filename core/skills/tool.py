"""The ``skill(name)`` tool: a skill's instructions and the list of its files.

Built per profile with exactly the skills that profile chose, so a profile without a skill
cannot load it (its name is simply unknown there). The files are listed where the
terminal sees them: ``/skills/<name>/…`` inside the bubblewrap sandbox, read-only
(:func:`core.skills.tool.skill_mounts`); the folder's own path with ``sandbox = "none"``.
The tool only reads: nothing of a skill is executed by the gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from core.skills.catalog import SANDBOX_ROOT, Skill, SkillError
from core.tools.base import Tool, ToolContext, ToolResult
from core.types import ToolSpec

SKILL_TOOL = "skill"


def skill_spec(names: list[str]) -> ToolSpec:
    return ToolSpec(
        name=SKILL_TOOL,
        description=(
            "Load a skill's instructions (the Skills section of the system prompt lists "
            "them) and the paths of its files, which the terminal can read."
        ),
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names}},
            "required": ["name"],
        },
    )


def skill_tool(skills: Mapping[str, Skill], mounted: bool) -> Tool:
    """The tool over ``skills``; ``mounted``: the terminal sees them under ``/skills``."""

    async def load(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = args.get("name")
        skill = skills.get(name) if isinstance(name, str) else None
        if skill is None:
            known = ", ".join(sorted(skills)) or "(none)"
            return ToolResult(f"No skill {name!r} here. Skills: {known}", is_error=True)
        try:
            return ToolResult(loaded(skill, mounted))
        except (OSError, SkillError) as error:
            return ToolResult(f"Skill {skill.name} cannot be read now: {error}", is_error=True)

    return Tool(spec=skill_spec(sorted(skills)), handler=load)


def loaded(skill: Skill, mounted: bool) -> str:
    """The tool's answer: the body, then where the skill's files are."""
    root = SANDBOX_ROOT / skill.name if mounted else PurePosixPath(skill.folder.as_posix())
    files = [f"- {root / path}" for path in skill.files()]
    listing = "\n".join([f"Files of this skill (read-only, under {root}):", *files])
    return f"# Skill: {skill.name}\n\n{skill.body()}" + (f"\n\n{listing}" if files else "")


def skill_mounts(skills: Mapping[str, Skill]) -> tuple[tuple[Path, str], ...]:
    """``(folder, path inside the sandbox)`` for each skill: bubblewrap ``--ro-bind``s."""
    return tuple((s.folder, str(SANDBOX_ROOT / s.name)) for s in skills.values())
