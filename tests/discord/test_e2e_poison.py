"""End to end: a gateway payload discord.py cannot parse, or our handlers cannot read, is a
dead letter and the connection goes on (adapters/discord/connection.py, ``guard_parsers``).

The payloads are the simulator's own valid MESSAGE_CREATE, INTERACTION_CREATE and
GUILD_CREATE with keys deleted or given values of the wrong type, sent over the live
gateway connection. They come from a user who is not allowed, so one that stays readable
is answered with the stranger's notice and never reaches the model. Hypothesis runs in a
worker thread and drives each example on the test's event loop: one gateway connection,
one adapter and one store serve every example.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.store.sqlite import SqliteStore
from tests.discord.conftest import GatewayFactory
from tests.discord.harness import Gateway
from tests.platform_sim import discord_payloads as dp
from tests.platform_sim.discord_sim import ALICE, GENERAL, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text

MALLORY = dp.DcUser("3999", "mallory")
DELETE = "<delete>"
WRONG: list[Any] = [DELETE, None, 0, -1, 2**70, True, "", "x", [], {}, [{}], {"id": None}]
FUZZ_EXAMPLES = int(os.environ.get("DISCORD_FUZZ_EXAMPLES", "100"))
EXAMPLE_TIMEOUT = 10.0

Json = dict[str, Any]


def attachment() -> Json:
    return {"id": "4001", "filename": "a.txt", "size": 1, "url": "http://127.0.0.1/a.txt",
            "proxy_url": "http://127.0.0.1/a.txt"}  # fmt: skip


def a_message(sim: DiscordSim, where: str = "dm") -> Json:
    channel = sim.dm_channel(MALLORY) if where == "dm" else sim.channels[GENERAL]
    data = sim.message_payload(channel, f"{sim.mention} hello", MALLORY)
    return data | {"attachments": [attachment()], "mentions": [sim.bot.to_json()]}


def a_press(sim: DiscordSim, user: dp.DcUser = MALLORY, custom_id: str = "ap:1:a") -> Json:
    """A press of the button ``custom_id`` on a card the bot sent ``user``."""
    dm = sim.dm_channel(user)
    button = {"type": 2, "style": 3, "label": "Approve", "custom_id": custom_id}
    card = sim.store(dp.message_json(sim.snowflake(), dm, sim.bot, "card",
                                     components=[{"type": 1, "components": [button]}]))  # fmt: skip
    return sim.interaction_payload(dm, user, card, type=3,
                                   data={"custom_id": custom_id, "component_type": 2})  # fmt: skip


def a_command(sim: DiscordSim) -> Json:
    command = next(c for c in sim.commands["global"] if c["name"] == "stop")
    data = {"id": command["id"], "name": "stop", "type": 1, "options": []}
    return sim.interaction_payload(sim.channels[GENERAL], MALLORY, type=2, data=data)


def a_guild(sim: DiscordSim) -> Json:
    return sim.guilds["1000"].to_json()


BASES: dict[str, tuple[str, Callable[[DiscordSim], Json]]] = {
    "dm message": ("MESSAGE_CREATE", a_message),
    "guild message": ("MESSAGE_CREATE", lambda sim: a_message(sim, "guild")),
    "press": ("INTERACTION_CREATE", a_press),
    "command": ("INTERACTION_CREATE", a_command),
    "guild": ("GUILD_CREATE", a_guild),
}
PATHS = {
    "dm message": ["id", "channel_id", "author", "author.id", "author.username", "author.bot",
                   "content", "attachments", "attachments.0", "attachments.0.id", "embeds",
                   "mentions", "mentions.0", "mentions.0.id", "type", "timestamp", "flags",
                   "components", "message_reference", "referenced_message", "tts"],
    "guild message": ["guild_id", "member", "member.roles", "member.joined_at", "channel_id",
                      "author.username", "mentions.0.username"],
    "press": ["id", "application_id", "type", "token", "version", "channel_id", "channel",
              "channel.id", "channel.type", "user", "user.id", "user.username", "data",
              "data.custom_id", "data.component_type", "message", "message.id",
              "message.author", "message.components", "message.components.0",
              "locale", "attachment_size_limit", "entitlements", "context"],
    "command": ["member", "member.user", "member.user.id", "guild_id", "data", "data.id",
                "data.name", "data.type", "data.options", "channel", "channel.type"],
    "guild": ["id", "name", "channels", "channels.0", "channels.0.id", "channels.0.type",
              "roles", "roles.0", "roles.0.id", "members", "members.0.user",
              "members.0.user.id", "threads", "emojis", "member_count", "features"],
}  # fmt: skip


def mutated(data: Json, changes: list[tuple[str, Any]]) -> Any:
    """``data`` with each ``(path, value)`` applied (``DELETE`` removes the key; a path
    through a value that is no longer an object or a list is skipped; the empty path
    replaces the whole payload)."""
    data = copy.deepcopy(data)
    for path, shared in changes:
        value = copy.deepcopy(shared)  # WRONG's objects are shared between examples
        if not path:
            return {} if value == DELETE else value
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = _child(node, part)
        if isinstance(node, dict):
            node.pop(last, None) if value == DELETE else node.__setitem__(last, value)
        elif isinstance(node, list) and last.isdigit() and node:
            node[0] = None if value == DELETE else value
    return data


def _child(node: Any, part: str) -> Any:
    if isinstance(node, list):
        return node[0] if node and part.isdigit() else None
    return node.get(part) if isinstance(node, dict) else None


def dead_letter_ids(letters: list[Any]) -> list[str]:
    return [letter.item_id for letter in letters]


async def send_and_settle(run: Gateway, sim: DiscordSim, event: str, data: Any) -> None:
    """Send one payload; return once it was parsed and what it started has ended."""
    await sim.gateway.send_raw(event, data)
    await parsed(sim)
    await run.adapter.drain()


async def parsed(sim: DiscordSim) -> None:
    """Once a press of Alice's sent after it is deferred, the payload before was parsed.

    (Not the gateway's heartbeat barrier: discord.py sends at most 110 frames a minute,
    and a long fuzz run would wait on that.)"""
    data = a_press(sim, ALICE, "st:barrier")
    await sim.gateway.send_raw("INTERACTION_CREATE", data)
    await sim.wait_for(lambda: sim.interactions[data["id"]].responses)


async def answered_after(sim: DiscordSim, text: str) -> None:
    dm = sim.dm_channel(ALICE)
    await sim.user_says(dm, "and now?")
    await sim.wait_for_bot_message(dm, lambda m: m.text == text)


def failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    """ERRORs of discord.py (an exception our handlers let out), of the adapter, or of a
    task whose exception nobody retrieved."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
            and r.name.startswith(("discord", "adapters", "asyncio"))]  # fmt: skip


@pytest.fixture
async def connected(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> Gateway:
    model_server.script(reply_text("still answering"))
    run = await gateway()
    discord_sim.guilds["1000"].members.append(MALLORY)
    return run


NAMED = [
    ("press", "application_id", DELETE),
    ("press", "data.custom_id", DELETE),
    ("press", "version", DELETE),
    ("press", "id", DELETE),
    ("press", "message", "not a message"),
    ("press", "message.components", DELETE),  # discord.py's dynamic-item task would raise
    ("press", "data", {"custom_id": 7, "component_type": "button"}),  # unknown shape
    ("command", "member.user", DELETE),
    ("dm message", "author.username", DELETE),
    ("dm message", "channel_id", DELETE),
    ("dm message", "id", DELETE),
    ("dm message", "attachments", 5),
    ("guild", "id", DELETE),
]


async def test_each_named_malformed_payload_is_one_dead_letter_and_the_connection_stays(
    connected: Gateway, discord_sim: DiscordSim, store: SqliteStore,
    model_server: ScriptedModelServer, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    for base, path, value in NAMED:
        event, build = BASES[base]
        before = len(await store.list_dead_letters("discord"))
        await send_and_settle(connected, discord_sim, event, mutated(build(discord_sim),
                                                                     [(path, value)]))  # fmt: skip
        letters = await store.list_dead_letters("discord")
        assert len(letters) == before + 1, f"{base} with {path}={value!r}: no dead letter"
        assert letters[-1].item_id.startswith(f"{event}:"), letters[-1].item_id
    await send_and_settle(connected, discord_sim, "MESSAGE_CREATE", [])  # d not even an object
    quarantined = [r for r in caplog.records if "quarantined as dead letter" in r.getMessage()]
    assert len(quarantined) == len(NAMED) + 1
    assert all(r.levelno == logging.WARNING for r in quarantined)
    await answered_after(discord_sim, "still answering")
    assert len(discord_sim.gateway.identifies) == 1 and discord_sim.gateway.accepted == 1
    assert connected.adapter.health.state == "up"
    assert failures(caplog) == [] and model_server.unscripted == 0


async def test_fuzzed_gateway_payloads_never_end_the_connection(
    connected: Gateway, discord_sim: DiscordSim, store: SqliteStore,
    model_server: ScriptedModelServer, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    loop = asyncio.get_running_loop()
    sent: list[str] = []

    @st.composite
    def payloads(draw: st.DrawFn) -> tuple[str, list[tuple[str, Any]]]:
        base = draw(st.sampled_from(sorted(BASES)))
        paths = st.sampled_from(["", *PATHS[base]])  # "": the whole of ``d``
        return base, draw(st.lists(st.tuples(paths, st.sampled_from(WRONG)), min_size=1,
                                   max_size=3))  # fmt: skip

    async def one_example(base: str, edits: list[tuple[str, Any]]) -> None:
        event, build = BASES[base]
        sent.append(event)
        await send_and_settle(connected, discord_sim, event, mutated(build(discord_sim), edits))

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(payload=payloads())
    def survives(payload: tuple[str, list[tuple[str, Any]]]) -> None:
        future = asyncio.run_coroutine_threadsafe(one_example(*payload), loop)
        future.result(timeout=EXAMPLE_TIMEOUT)

    started = time.perf_counter()
    await asyncio.to_thread(survives)
    elapsed = time.perf_counter() - started
    await answered_after(discord_sim, "still answering")
    letters = dead_letter_ids(await store.list_dead_letters("discord"))
    print(f"\nfuzz: {len(sent)} payloads in {elapsed:.2f}s, {len(letters)} dead letters")
    assert len(sent) >= FUZZ_EXAMPLES // 2 and letters
    assert all(item.split(":")[0] in set(sent) for item in letters)
    assert len(discord_sim.gateway.identifies) == 1 and discord_sim.gateway.accepted == 1
    assert connected.adapter.health.state == "up"
    assert failures(caplog) == [] and model_server.unscripted == 0
