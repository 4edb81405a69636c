"""End to end: one conversation across Telegram and the web chat (``/link``, issue 22 point 4).

One GatewayService runs the real Telegram adapter (python-telegram-bot against the
simulator) and the web chat (real HTTP to its server, Server-Sent Events read back), the
scripted model server over HTTP, a real SQLite file. Alice links her Telegram DM with the
web chat; then a message on Telegram and one on the web continue one history, each answer
goes back where its message came from, a web ``/stop`` stops the Telegram-started turn,
and ``/unlink`` separates them again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from adapters.session_keys import session_key
from adapters.telegram import TelegramAdapter
from adapters.web import WebAdapter
from adapters.web.adapter import WebSettings
from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from gateway.control.access import AccessPolicy
from gateway.control.links import CODE_ALPHABET, CODE_LENGTH, linked_key
from gateway.service import ChatPolicy, Engine, GatewayService
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.telegram.harness import MENU, shared_clock, sim_settings
from tests.web.harness import EventStream, Frame, Running

CONVERSATION = "linked-chat"
WEB_USER = "local"


@dataclass
class Linked:
    running: Running
    sim: TelegramSim
    models: ScriptedModelServer
    web: EventStream

    async def telegram_says(self, text: str) -> None:
        await self.sim.user_says(ALICE.id, text)

    async def telegram_reply(self, text: str) -> str:
        found = await self.sim.wait_for_bot_message(ALICE.id, lambda m: text in m.text)
        return found.text

    async def web_reply(self, text: str) -> Frame:
        return await self.web.message_containing(text)

    def person(self) -> str:
        person = self.running.service.links.person_of("telegram", str(ALICE.id))
        assert person is not None
        return person


def compose(
    sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore, tmp: Path
) -> tuple[GatewayService, OpenAIClient]:
    """Telegram (on the simulator) and the web chat in one service; Alice may talk on
    Telegram, the web chat's user on the web."""
    clock = shared_clock(sim, None)
    settings = sim_settings(
        sim, pace_clock=clock, edit_interval=0.25, commands=MENU, streaming="off"
    )
    telegram = TelegramAdapter(sim.token, store, settings, key_rule=session_key)
    web = WebAdapter(store, WebSettings(host="127.0.0.1", port=0, user=WEB_USER))
    model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
    hooks = HookRegistry()
    register_builtin_hooks(hooks)
    profile = AgentProfile(soul="You are a test agent.", workspace=tmp / "workspace")
    engine = Engine(store, model, ToolRegistry(), hooks, {"default": profile})
    chat = ChatPolicy(
        access={
            "telegram": AccessPolicy(allowed_users=frozenset({str(ALICE.id)})),
            "web": AccessPolicy(allowed_users=frozenset({WEB_USER})),
        },
        progress=ProgressConfig(mode="all", becomes_reply=False),
    )
    return GatewayService(engine, chat, adapters=[telegram, web]), model


@pytest.fixture
async def linked(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[Linked]:  # fmt: skip
    """Alice's Telegram DM and the web chat's conversation, linked by ``/link``."""
    service, model = compose(telegram_sim, model_server, store, tmp_path)
    await service.start()
    adapter = service.directory.adapter("web")
    assert isinstance(adapter, WebAdapter)
    http = aiohttp.ClientSession(trust_env=False)
    running = Running(service, adapter, http)
    web = await running.events(CONVERSATION)
    run = Linked(running, telegram_sim, model_server, web)
    try:
        await run.telegram_says("/link")
        code = code_in(await run.telegram_reply("link code"))
        await running.send(CONVERSATION, f"/link {code}")
        await run.web_reply("Linked")
        await run.telegram_reply("link code was used")
        yield run
    finally:
        await web.close()
        await http.close()
        await service.stop()
        await model.aclose()


def code_in(text: str) -> str:
    found = re.search(rf"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}", text)
    assert found is not None, text
    return found.group(0)


def said(request_messages: list[dict[str, object]]) -> list[str]:
    """The user turns a model request carries (first line: the time note follows)."""
    return [str(m["content"]).split("\n")[0] for m in request_messages if m["role"] == "user"]


def web_texts(run: Linked) -> str:
    return " ".join(str(f.data.get("html", "")) for f in run.web.frames)


def telegram_texts(run: Linked) -> str:
    return " ".join(m.text for m in run.sim.bot_messages(ALICE.id))


async def test_telegram_then_web_continue_one_history_answered_where_each_came_from(
    linked: Linked,
) -> None:
    linked.models.script(reply_text("Answer on Telegram."), reply_text("Answer on the web."))
    await linked.telegram_says("hello from telegram")
    await linked.telegram_reply("Answer on Telegram.")
    await linked.running.send(CONVERSATION, "and now from the web")
    await linked.web_reply("Answer on the web.")
    _, second = await linked.models.wait_for_requests(2)
    assert said(second.messages) == ["hello from telegram", "and now from the web"]
    assert "Answer on Telegram." in str(second.messages)  # the model sees both turns
    assert "Answer on the web." not in telegram_texts(linked)
    assert "Answer on Telegram." not in web_texts(linked)


async def test_a_web_stop_stops_the_turn_started_on_telegram(linked: Linked) -> None:
    linked.models.script(reply_hang(reply_text("never sent")), reply_text("Next one."))
    await linked.telegram_says("think for a long time")
    [held] = await linked.models.wait_for_requests(1)
    await linked.running.send(CONVERSATION, "/stop")
    await linked.web_reply("Stopped")
    key = str(linked_key(linked.person()))
    await asyncio.wait_for(linked.running.service.dispatcher.wait_idle(key), 5)
    await asyncio.wait_for(held.closed.wait(), 5)
    await linked.telegram_says("are you there?")
    await linked.telegram_reply("Next one.")
    assert "never sent" not in telegram_texts(linked) + web_texts(linked)


async def test_unlink_gives_each_platform_its_own_conversation_again(linked: Linked) -> None:
    linked.models.script(reply_text("Linked answer."), reply_text("Web alone."))
    await linked.telegram_says("remember the telegram message")
    await linked.telegram_reply("Linked answer.")
    await linked.running.send(CONVERSATION, "/unlink")
    await linked.web_reply("Unlinked")
    await linked.running.send(CONVERSATION, "only the web now")
    await linked.web_reply("Web alone.")
    _, alone = await linked.models.wait_for_requests(2)
    assert said(alone.messages) == ["only the web now"]
    assert linked.running.service.links.person_of("telegram", str(ALICE.id)) is None
