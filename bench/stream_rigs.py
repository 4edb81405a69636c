"""The gateways the ``streaming`` benchmark asks (:mod:`bench.streaming`): one per
platform, composed by the wiring from a config section pointing at its simulator, with the
scripted model server streaming ``ANSWER`` and a real SQLite store; each rig asks one
question and reads, from the simulator's calls, when the answer's text was first shown and
how many calls it cost."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore, open_store
from gateway.config import parse_config
from gateway.service import GatewayService
from gateway.wiring import build_service
from tests.support.model_server import ScriptedModelServer, reply_text

WORDS = 30
GAP = 0.05
"""Seconds between two streamed events of the model's answer."""
ANSWER = " ".join(f"word{n:02d}" for n in range(WORDS)) + "."
WAIT = 30.0
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer as the benchmark saw it."""

    first_token: float
    first_visible: float
    calls: int

    @property
    def latency_ms(self) -> float:
        return (self.first_visible - self.first_token) * 1000


class Rig(Protocol):
    """One running gateway on one platform, asked one question at a time."""

    async def ask(self, index: int) -> Answer: ...

    def rate_limited(self) -> int: ...


RigFactory = Callable[[str, Path], AbstractAsyncContextManager[Rig]]
"""Makes a rig for a ``streaming`` mode in a scratch folder."""


# the shared parts --------------------------------------------------------------------------
@asynccontextmanager
async def model_and_store(home: Path) -> AsyncIterator[tuple[ScriptedModelServer, SqliteStore]]:
    """The scripted model server answering every request with the streamed ``ANSWER``,
    and a fresh SQLite store."""
    async with ScriptedModelServer() as models:
        models.default = reply_text(ANSWER, gap=GAP)
        store = await open_store(home / "store.db")
        try:
            yield models, store
        finally:
            await store.close()


@asynccontextmanager
async def running(
    data: dict[str, Any], home: Path, store: SqliteStore, models: ScriptedModelServer
) -> AsyncIterator[GatewayService]:
    """The service composed from config ``data`` by the wiring, started, then stopped."""
    config = parse_config(data, None, {"COMMONOS_HOME": str(home)})
    model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
    service = build_service(config, store, model)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
        await model.aclose()


def model_section(models: ScriptedModelServer) -> dict[str, Any]:
    return {
        "model": {"base_url": models.url, "model": "scripted", "api_key": "sk-bench"},
        "profiles": {"default": {"sandbox": "none", "stream": True}},
        "progress": {"mode": "off"},
    }


def first_token(models: ScriptedModelServer) -> float:
    """When the latest request's first word left the model server (one ``GAP`` after it
    arrived: the role event is sent at once, each next event a gap later)."""
    return models.requests[-1].at + GAP


async def idle(service: GatewayService, key: str) -> None:
    await asyncio.wait_for(service.dispatcher.wait_idle(key), WAIT)


# Discord -----------------------------------------------------------------------------------
DISCORD_CALLS = ("create_message", "edit_message", "delete_message", "typing")


@dataclass
class DiscordRig:
    """``threads``: each question mentions the bot in a guild channel, which opens a thread
    (a channel of its own, with its own budget); else every question in one DM, asked as
    soon as the last answer ended (the budget the last answers spent still counts)."""

    sim: Any
    models: ScriptedModelServer
    service: GatewayService
    threads: bool

    async def ask(self, index: int) -> Answer:
        from tests.platform_sim.discord_sim import ALICE, GENERAL

        mark = len(self.sim.calls)
        if self.threads:
            asked = await self.sim.user_says(GENERAL, f"{self.sim.mention} question {index}")
            channel, key = asked.id, f"discord:thread:{asked.id}"
        else:
            channel = self.sim.dm_channel(ALICE).id
            await self.sim.user_says(channel, f"question {index}")
            key = f"discord:dm:{channel}"
        await self.sim.wait_for(lambda: self._answered(channel, index), timeout=WAIT)
        await idle(self.service, key)
        calls = [c for c in self.sim.calls[mark:] if c.method in DISCORD_CALLS
                 and c.params.get("channel_id") == channel]  # fmt: skip
        shown = next(c.arrived for c in calls if c.method == "create_message")
        return Answer(first_token(self.models), shown, len(calls))

    def _answered(self, channel: str, index: int) -> bool:
        done = [m for m in self.sim.bot_messages(channel) if m.text == ANSWER]
        return len(done) > (0 if self.threads else index)

    def rate_limited(self) -> int:
        return sum(1 for c in self.sim.calls if c.status == 429)


def discord_rig(threads: bool) -> RigFactory:
    @asynccontextmanager
    async def rig(streaming: str, home: Path) -> AsyncIterator[Rig]:
        from tests.discord.harness import discord_config_data
        from tests.platform_sim.discord_sim import DiscordSim

        sim = DiscordSim()
        await sim.start()
        async with AsyncExitStack() as stack:
            stack.push_async_callback(sim.stop)
            models, store = await stack.enter_async_context(model_and_store(home))
            data = discord_config_data(sim, models, edit_interval=1.0, streaming=streaming)
            data |= model_section(models)
            service = await stack.enter_async_context(running(data, home, store, models))
            yield DiscordRig(sim, models, service, threads)

    return rig


# Telegram ----------------------------------------------------------------------------------
FIRST_USER, FIRST_GROUP = 7_000, -1_005_000


@dataclass
class TelegramRig:
    """Each question in a chat of its own (its own flood budget): a new user's private chat
    (a draft), or a new supergroup where Alice mentions the bot (edits)."""

    sim: Any
    models: ScriptedModelServer
    service: GatewayService
    groups: bool

    async def ask(self, index: int) -> Answer:
        from tests.platform_sim.telegram_sim import ALICE

        mark = len(self.sim.calls)
        if self.groups:
            chat = FIRST_GROUP - index
            self.sim.add_group(chat)
            await self.sim.user_says(chat, f"@test_bot question {index}", user=ALICE)
            key = f"telegram:group:{chat}:{ALICE.id}"
        else:
            chat = FIRST_USER + index
            await self.sim.user_says(chat, f"question {index}")
            key = f"telegram:dm:{chat}"
        await self.sim.wait_for(lambda: self._answered(chat), timeout=WAIT)
        await idle(self.service, key)
        calls = [c for c in self.sim.calls[mark:] if str(c.params.get("chat_id")) == str(chat)]
        shown = next(c.arrived for c in calls if c.method in ("sendMessage", "sendMessageDraft"))
        return Answer(first_token(self.models), shown, len(calls))

    def _answered(self, chat: int) -> bool:
        return any(m.text == ANSWER for m in self.sim.messages(chat) if m.from_bot)

    def rate_limited(self) -> int:
        return sum(1 for c in self.sim.calls if c.status == 429)


def telegram_rig(groups: bool) -> RigFactory:
    @asynccontextmanager
    async def rig(streaming: str, home: Path) -> AsyncIterator[Rig]:
        from tests.platform_sim.telegram_sim import ALICE, TelegramSim

        sim = TelegramSim()
        await sim.start()
        async with AsyncExitStack() as stack:
            stack.push_async_callback(sim.stop)
            models, store = await stack.enter_async_context(model_and_store(home))
            users = [ALICE.id, *range(FIRST_USER, FIRST_USER + 1000)]
            data = model_section(models) | {"web": {"enabled": False}, "telegram": {
                "token": sim.token, "base_url": f"{sim.url}/bot",
                "base_file_url": f"{sim.url}/file/bot", "allowed_users": users,
                "streaming": streaming,
            }}  # fmt: skip
            service = await stack.enter_async_context(running(data, home, store, models))
            yield TelegramRig(sim, models, service, groups)

    return rig


# Slack -------------------------------------------------------------------------------------
SLACK_SHOWS = ("chat.startStream", "chat.postMessage")


@dataclass
class SlackRig:
    """Each question mentions the bot in the channel: the answer is in its thread."""

    sim: Any
    models: ScriptedModelServer
    service: GatewayService

    async def ask(self, index: int) -> Answer:
        from tests.platform_sim.slack_sim import GENERAL

        mark = len(self.sim.calls)
        asked = await self.sim.user_says(GENERAL, f"{self.sim.mention} question {index}")

        def answered() -> bool:
            replies = self.sim.bot_messages(GENERAL)
            return any(m.thread == asked.id and m.text == ANSWER for m in replies)

        await self.sim.wait_for(answered, timeout=WAIT)
        await idle(self.service, f"slack:thread:{GENERAL}:{asked.id}")
        calls = [c for c in self.sim.calls[mark:] if c.params.get("channel") == GENERAL]
        shown = next(c.arrived for c in calls if c.method in SLACK_SHOWS)
        return Answer(first_token(self.models), shown, len(calls))

    def rate_limited(self) -> int:
        return sum(1 for c in self.sim.calls if c.status == 429)


@asynccontextmanager
async def slack_rig(streaming: str, home: Path) -> AsyncIterator[Rig]:
    from tests.platform_sim.slack_sim import SlackSim
    from tests.slack.harness import slack_config_data

    for name in PROXY_VARS:  # slack_sdk honours them and ignores NO_PROXY
        os.environ.pop(name, None)
    sim = SlackSim()
    await sim.start()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(sim.stop)
        models, store = await stack.enter_async_context(model_and_store(home))
        data = slack_config_data(sim, models, "socket", streaming=streaming, edit_interval=1.0)
        data |= model_section(models)
        service = await stack.enter_async_context(running(data, home, store, models))
        yield SlackRig(sim, models, service)


# web chat ----------------------------------------------------------------------------------
@dataclass
class WebRig:
    url: str
    http: Any
    models: ScriptedModelServer
    service: GatewayService
    frames: list[Frame]

    async def ask(self, index: int) -> Answer:
        mark = len(self.frames)
        body = {
            "conversation": CONVERSATION,
            "id": f"question{index:04d}",
            "text": f"question {index}",
        }
        async with self.http.post(f"{self.url}/api/send", json=body) as response:
            assert response.status == 202, await response.text()
        last = ANSWER.split()[-1]
        await _until(lambda: any(f.kind == "message" and last in f.data
                                 for f in self.frames[mark:]))  # fmt: skip
        await idle(self.service, f"web:dm:{CONVERSATION}")
        frames = self.frames[mark:]
        shown = next(f.at for f in frames if f.kind in ("delta", "live"))
        return Answer(first_token(self.models), shown, len(frames))

    def rate_limited(self) -> int:
        return 0


CONVERSATION = "benchstream0001"


async def _until(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll ``condition`` (bounded): the SSE reader appends frames as they arrive."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the web chat's answer did not arrive")
        await asyncio.sleep(0.002)


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE event as the page got it: when, its name and its raw data."""

    at: float
    kind: str
    data: str


async def _read_frames(response: Any, frames: list[Frame]) -> None:
    """Append each SSE event of ``response`` as it arrives."""
    event = data = ""
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and event:
            frames.append(Frame(time.monotonic(), event, data))
            event = data = ""


@asynccontextmanager
async def web_rig(streaming: str, home: Path) -> AsyncIterator[Rig]:
    import aiohttp

    from gateway.web.compose import web_adapter_of

    async with AsyncExitStack() as stack:
        models, store = await stack.enter_async_context(model_and_store(home))
        data = model_section(models) | {
            "gateway": {"data_dir": str(home)},
            "web": {"listen": "127.0.0.1:0"},
        }
        data["profiles"]["default"]["workspace"] = str(home / "workspace")
        service = await stack.enter_async_context(running(data, home, store, models))
        url = (web_adapter_of(service).url or "").rstrip("/")
        http = await stack.enter_async_context(aiohttp.ClientSession(trust_env=False))
        events = await http.get(f"{url}/api/events", params={"conversation": CONVERSATION})
        stack.callback(events.close)
        frames: list[Frame] = []
        reader = asyncio.create_task(_read_frames(events, frames))
        stack.callback(reader.cancel)
        await _until(lambda: bool(frames))  # the snapshot: the page is listening
        yield WebRig(url, http, models, service, frames)
