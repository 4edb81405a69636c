"""The skills' part of the stable prompt tier: names and descriptions only.

Appended after SOUL.md (``docs/turn-loop.md`` §2 step 3;
:attr:`core.agent.profile.AgentProfile.skills_index`), so it is part of the cached
prefix and changes only when the operator's skills change. Bodies stay out: the model
calls ``skill(name)`` when a task needs one. Lines are added in name order until
``prompt_chars`` would be passed; the skills left out are counted in the last line (the
``skill`` tool still loads them by name).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.skills.catalog import Skill

HEADING = (
    "## Skills\n"
    "Instructions for particular tasks, loaded with the skill tool (skill(name)) when a "
    "task needs one:"
)


def skills_index(skills: Iterable[Skill], prompt_chars: int) -> str:
    """The section, or ``""`` when there are no skills."""
    listed = list(skills)
    if not listed:
        return ""
    lines = [HEADING]
    used = len(HEADING)
    for count, skill in enumerate(listed):
        text = f"- {skill.name}: {skill.description}"
        if used + len(text) + 1 > prompt_chars:
            lines.append(f"- ({len(listed) - count} more; ask the skill tool by name)")
            break
        lines.append(text)
        used += len(text) + 1
    return "\n".join(lines)
