"""A turn ended by the review input budget tells the chat so (docs/turn-loop.md §8, §9):
the engine's result carries the reply, and the gateway delivers it on Telegram."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from gateway.control.access import AccessPolicy
from gateway.service import ChatPolicy, Engine, GatewayService
from tests.engine.conftest import Rig
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import Gateway, GatewaySetup

SPENT = "I ran out of my input budget (800 of 500 tokens) before finishing."


async def test_a_turn_ended_by_the_review_input_budget_has_a_reply(rig: Rig) -> None:
    rig.agent(review_input_budget=500)
    rig.server.script(reply_tool_call("echo", {"text": "x"}, usage=(800, 5)), reply_text("no"))

    result = await rig.turn("review this")

    assert (result.status, result.exit_reason) == (
        "budget_exhausted",
        "review_input_budget_exhausted",
    )
    assert result.reply == SPENT
    assert len(rig.server.requests) == 1


class BudgetedGateway(Gateway):
    """The harness's gateway, its profile with a review input budget of 500 tokens."""

    def _compose(self) -> GatewayService:
        hooks = HookRegistry()
        register_builtin_hooks(hooks)
        profile = AgentProfile(
            soul="You are a test agent.", workspace=self.workspace, review_input_budget=500
        )
        engine = Engine(
            store=self.store,
            model=self.model,
            tools=ToolRegistry(builtin_tools(self.workspace)),
            hooks=hooks,
            profiles={"default": profile},
        )
        access = {"telegram": AccessPolicy(allowed_users=self.setup.allowed_users)}
        chat = ChatPolicy(access=access, progress=self.setup.progress)
        return GatewayService(engine, chat, adapters=[self.adapter])


@pytest.fixture
async def budgeted(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[Gateway]:  # fmt: skip
    setup = replace(GatewaySetup(), edit_interval=0.05)
    run = BudgetedGateway(telegram_sim, model_server, store, tmp_path, setup)
    await run.start()
    try:
        yield run
    finally:
        await run.stop()


async def test_the_review_budget_reply_reaches_the_telegram_chat(
    budgeted: Gateway, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_tool_call("read_file", {"path": "notes.txt"}, usage=(800, 5)))

    await telegram_sim.user_says(ALICE.id, "review my notes")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "input budget" in m.text)

    assert reply.text == SPENT
    await budgeted.idle(f"telegram:dm:{ALICE.id}")
    assert len(model_server.requests) == 1
