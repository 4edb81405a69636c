"""Skills: found, validated, listed in the stable tier, loaded by the ``skill`` tool, and
chosen per profile (issue 32, README "Skills")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.agent.profile import AgentProfile
from core.cancellation import CancellationToken
from core.skills.catalog import load_catalog
from core.skills.index import skills_index
from core.skills.tool import skill_tool
from core.tools.base import ToolContext
from gateway.config import load_config
from gateway.control.skills import SkillsFeature
from tests.skills.support import PDF_BODY, pdf_skill, write_skill

HOSTILE = [
    ("evil", "name: ../../etc\ndescription: x", "name '../../etc' must be"),
    ("Upper", "name: Upper\ndescription: x", "name 'Upper' must be"),
    ("inject", 'name: "inject\\n## System"\ndescription: x', "must be 1-64"),
    ("other", "name: pdf-forms\ndescription: x", "differs from its folder"),
    ("nodesc", "name: nodesc", "description missing"),
    ("broken", "name: broken\ndescription: [unclosed", "not valid YAML"),
    ("list", "- name\n- description", "must be a mapping"),
]


def context() -> ToolContext:
    return ToolContext("telegram:dm:1", "s", "t", "c", CancellationToken(), Path("/nowhere"))


@pytest.mark.parametrize(("folder", "front", "why"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_bad_skill_is_skipped_with_one_warning_and_the_others_load(
    tmp_path: Path, folder: str, front: str, why: str
) -> None:
    pdf_skill(tmp_path)
    write_skill(tmp_path, folder, front)
    catalog = load_catalog([tmp_path, tmp_path / "missing"])
    assert list(catalog.skills) == ["pdf-forms"]
    assert len(catalog.warnings) == 1
    assert str(tmp_path / folder) in catalog.warnings[0] and why in catalog.warnings[0]


def test_a_skill_file_without_front_matter_or_behind_a_link_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "plain").mkdir(parents=True)
    (root / "plain" / "SKILL.md").write_text("just text\n")
    (root / "linked").symlink_to(pdf_skill(tmp_path / "outside"))
    warnings = load_catalog([root]).warnings
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "not a directory (symbolic links are not followed)",
        "SKILL.md does not start with '---' front matter",
    ]


def test_the_index_holds_names_and_descriptions_within_prompt_chars(tmp_path: Path) -> None:
    for n in range(30):
        write_skill(tmp_path, f"skill-{n:02}", f"name: skill-{n:02}\ndescription: {'word ' * 20}")
    skills = load_catalog([tmp_path]).skills.values()
    index = skills_index(skills, prompt_chars=1000)
    assert len(index) <= 1000 + 60
    assert "- skill-00: word word" in index and "more; ask the skill tool by name" in index
    one = load_catalog([pdf_skill(tmp_path / "p").parent]).skills.values()
    assert PDF_BODY not in skills_index(one, 4000)


async def test_the_skill_tool_loads_the_body_and_lists_files_where_the_terminal_sees_them(
    tmp_path: Path,
) -> None:
    pdf_skill(tmp_path)
    skills = load_catalog([tmp_path]).skills
    mounted = await skill_tool(skills, mounted=True).handler({"name": "pdf-forms"}, context())
    assert PDF_BODY in mounted.text and "- /skills/pdf-forms/scripts/fill.sh" in mounted.text
    host = await skill_tool(skills, mounted=False).handler({"name": "pdf-forms"}, context())
    assert f"- {tmp_path}/pdf-forms/scripts/fill.sh" in host.text
    unknown = await skill_tool(skills, mounted=True).handler({"name": "../x"}, context())
    assert unknown.is_error and "No skill '../x' here" in unknown.text


def test_each_profile_gets_the_skills_it_chose_default_all(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pdf_skill(home / "skills")
    write_skill(home / "skills", "review", "name: review\ndescription: Review a diff.")
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        f'[gateway]\ndata_dir = "{home}"\n[skills]\nprompt_chars = 2000\n'
        '[profiles.default]\n[profiles.writer]\nskills = ["review", "absent"]\n'
    )
    feature = SkillsFeature.build(load_config(config_file, env={}))
    assert feature is not None
    assert list(feature.skills("default")) == ["pdf-forms", "review"]
    assert list(feature.skills("writer")) == ["review"]
    writer = feature.profile("writer", AgentProfile(name="writer")).skills_index
    assert "- review: Review a diff." in writer and "pdf-forms" not in writer


def test_no_skills_directory_imports_nothing_of_skills(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from gateway.config import load_config;"
        "from gateway.wiring import _skills;"
        f"p = Path({str(tmp_path)!r}) / 'c.toml';"
        f"p.write_text('[gateway]\\ndata_dir = \"{tmp_path}\"\\n');"
        "assert _skills(load_config(p, env={})) is None;"
        "print(sorted(m for m in sys.modules if 'skills' in m))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['gateway.config.skills']"


def test_the_wiring_gives_each_profile_its_skill_tool_and_index(tmp_path: Path) -> None:
    from core.model.demo import DemoModel
    from gateway.web.metrics import GatewayMetrics
    from gateway.wiring import _engine

    home = tmp_path / "home"
    pdf_skill(home / "skills")
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        f'[gateway]\ndata_dir = "{home}"\n[profiles.default]\n[profiles.bare]\nskills = []\n'
    )
    config = load_config(config_file, env={})
    store: Any = None  # memory is off: the store is not asked
    engine = _engine(config, store, DemoModel(), None, GatewayMetrics())
    assert "skill" in engine.tools["default"].names()
    assert "skill" not in engine.tools["bare"].names()
    assert "- pdf-forms: Fill in PDF forms with pdftk." in engine.profiles["default"].skills_index
    assert engine.profiles["bare"].skills_index == ""
