"""End to end (Telegram simulator, scripted model): a skill's description is in the
stable tier, its body only once the ``skill`` tool loaded it, and a profile without the
skill cannot load it (issue 32, README "Skills")."""

from __future__ import annotations

from pathlib import Path

from core.skills.catalog import load_catalog
from gateway.control.skills import SkillsFeature
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.skills.support import PDF_BODY, pdf_skill, write_skill
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

DESCRIPTION = "Fill in PDF forms with pdftk."


def feature(root: Path, chosen: list[str] | None) -> SkillsFeature:
    pdf_skill(root)
    write_skill(root, "review", "name: review\ndescription: Review a diff.")
    return SkillsFeature({"default": load_catalog([root]).only(chosen)}, prompt_chars=4000)


async def test_the_description_is_in_the_prompt_and_the_body_only_after_the_skill_tool(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    model_server.script(reply_tool_call("skill", {"name": "pdf-forms"}), reply_text("Done."))
    await gateway(skills=feature(tmp_path / "skills", None))
    await telegram_sim.user_says(ALICE.id, "fill in this form")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Done.")
    first, second = model_server.requests[0].messages, model_server.requests[1].messages
    system = str(first[0]["content"])
    assert f"- pdf-forms: {DESCRIPTION}" in system and "- review: Review a diff." in system
    assert all(PDF_BODY not in str(m.get("content")) for m in first)
    assert second[0] == first[0]  # the stable tier did not move
    loaded = str(second[-1]["content"])
    assert PDF_BODY in loaded and "pdf-forms/scripts/fill.sh" in loaded
    tool = model_server.requests[0].body["tools"]
    assert [t for t in tool if t["function"]["name"] == "skill"]


async def test_a_profile_without_the_skill_cannot_load_it(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    model_server.script(reply_tool_call("skill", {"name": "pdf-forms"}), reply_text("Cannot."))
    await gateway(skills=feature(tmp_path / "skills", ["review"]))
    await telegram_sim.user_says(ALICE.id, "fill in this form")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Cannot.")
    system = str(model_server.requests[0].messages[0]["content"])
    assert "review" in system and DESCRIPTION not in system
    answer = str(model_server.requests[1].messages[-1]["content"])
    assert "No skill 'pdf-forms' here. Skills: review" in answer and PDF_BODY not in answer
