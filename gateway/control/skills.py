"""Skills in the gateway (issue 32, README "Skills"): built only when a ``[skills]``
directory exists and holds at least one valid skill (:func:`SkillsFeature.build`).

Each profile gets the skills it chose (``[profiles.<name>] skills``, default: all):
their names and descriptions in its stable prompt tier
(:attr:`core.agent.profile.AgentProfile.skills_index`), the ``skill`` tool over exactly
those (:mod:`core.skills.tool`), and — with a bubblewrap terminal — their folders mounted
read-only at ``/skills/<name>``. Skills are files the operator placed: nothing is
installed from a network, and the gateway never runs a skill's files (the agent may read
them, and run what it likes in its sandbox, as with any file).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from core.agent.profile import AgentProfile
from core.skills.catalog import Catalog, Skill, load_catalog
from core.skills.index import skills_index
from core.skills.tool import skill_mounts, skill_tool
from core.tools.base import Tool
from core.tools.sandbox import Bubblewrap, Sandbox
from gateway.config import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SkillsFeature:
    chosen: Mapping[str, Mapping[str, Skill]]
    """Each profile's skills, by name."""
    prompt_chars: int

    @classmethod
    def build(cls, config: Config) -> SkillsFeature | None:
        """The feature, or None when no skill was found (warnings logged either way)."""
        catalog = load_catalog(config.skills.folders(config.data_dir))
        for warning in catalog.warnings:
            log.warning("%s", warning)
        if not catalog.skills:
            return None
        chosen = {name: _chosen(catalog, name, p.skills) for name, p in config.profiles.items()}
        return cls(chosen, config.skills.prompt_chars)

    def skills(self, profile: str) -> Mapping[str, Skill]:
        return self.chosen.get(profile, {})

    def profile(self, name: str, profile: AgentProfile) -> AgentProfile:
        """``profile`` with its skills' index in the stable tier."""
        return replace(
            profile, skills_index=skills_index(self.skills(name).values(), self.prompt_chars)
        )

    def sandbox(self, profile: str, sandbox: Sandbox) -> Sandbox:
        """A bubblewrap sandbox that also sees the profile's skills, read-only."""
        mounts = skill_mounts(self.skills(profile))
        if not isinstance(sandbox, Bubblewrap) or not mounts:
            return sandbox
        return replace(sandbox, read_only=(*sandbox.read_only, *mounts))

    def tools(self, profile: str, sandbox: Sandbox) -> list[Tool]:
        """The ``skill`` tool when the profile has any skill."""
        skills = self.skills(profile)
        return [skill_tool(skills, isinstance(sandbox, Bubblewrap))] if skills else []


def _chosen(catalog: Catalog, profile: str, names: tuple[str, ...] | None) -> dict[str, Skill]:
    for unknown in sorted(set(names or ()) - catalog.skills.keys()):
        log.warning("profiles.%s.skills names %r: no such skill was found", profile, unknown)
    return catalog.only(names)
