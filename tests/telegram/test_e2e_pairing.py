"""End to end: pairing (docs/pairing.md) through the real python-telegram-bot against the
Telegram simulator, the scripted model server and a real SQLite file.

A stranger's DM gets a code and the model sees nothing; the owner's ``/pair approve`` (or
a real ``commonos pair approve`` process on the same data dir) lets them in and they are
told; an expired or wrong code does nothing and says so; 100 wrong codes from one user
never block another user's pairing; after a restart the paired user is still in."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.store.sqlite import SqliteStore, open_store
from core.tools.base import ToolRegistry
from gateway.config import load_config
from gateway.control.access import AccessPolicy
from gateway.inbound.pairing import WRONG_CODE, YOU_ARE_IN, PairingSettings
from gateway.service import ChatPolicy, Engine, GatewayService, Pacing
from tests.platform_sim.base import SimMessage
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim, TgUser
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import ALLOWED, Gateway, GatewaySetup

CAROL, DAVE = TgUser(99, "Carol", "carol"), TgUser(98, "Dave", "dave")
CODE = re.compile(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}")
TTL = 3600.0
CLI_TIMEOUT = 30.0


class WallClock:
    """The wall time, moved ahead by the test (codes' expiry)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


class PairingGateway(Gateway):
    """The harness's gateway with ``[telegram] pairing = true``, Alice and Bob owners."""

    wall: WallClock

    def _compose(self) -> GatewayService:
        hooks = HookRegistry()
        register_builtin_hooks(hooks)
        profile = AgentProfile(soul="You are a test agent.", workspace=self.workspace)
        engine = Engine(
            store=self.store, model=self.model, tools=ToolRegistry(), hooks=hooks,
            profiles={"default": profile},
        )  # fmt: skip
        policy = AccessPolicy(
            allowed_users=ALLOWED, owners=frozenset({str(ALICE.id), str(BOB.id)}),
            pairing=True, pairing_ttl=TTL,
        )  # fmt: skip
        chat = ChatPolicy(
            access={"telegram": policy}, progress=self.setup.progress,
            pairing=PairingSettings(sync_seconds=0.05),
        )  # fmt: skip
        pacing = Pacing(wall_clock=self.wall)
        return GatewayService(engine, chat, pacing, adapters=[self.adapter])


Start = Callable[[], Awaitable[PairingGateway]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "config.toml").write_text(f'[gateway]\ndata_dir = "{tmp_path / "data"}"\n')
    return tmp_path


@pytest.fixture
async def data_store(home: Path) -> AsyncIterator[SqliteStore]:
    """The store file of ``home``'s config: the one ``commonos pair`` opens too."""
    opened = await open_store(load_config(home / "config.toml").gateway.db_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def start(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, data_store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[Start]:  # fmt: skip
    """Start a pairing gateway; calling again is a restart on the same store."""
    runs: list[PairingGateway] = []
    wall = WallClock()
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    async def run() -> PairingGateway:
        if runs:
            await runs[-1].stop()
        PairingGateway.wall = wall
        gateway = PairingGateway(telegram_sim, model_server, data_store, workspace, GatewaySetup())
        runs.append(gateway)
        await gateway.start()
        return gateway

    try:
        yield run
    finally:
        for gateway in runs:
            await gateway.stop()


async def say(sim: TelegramSim, user: TgUser, text: str, wanted: str) -> SimMessage:
    """``user`` writes to the bot in their DM; the bot's next message there holding
    ``wanted``."""
    before = len(sim.bot_messages(user.id))
    await sim.user_says(user.id, text, user=user)

    def answered() -> SimMessage | None:
        new = sim.bot_messages(user.id)[before:]
        return next((m for m in new if wanted in m.text), None)

    return await sim.wait_for(answered)


async def get_code(sim: TelegramSim, user: TgUser, text: str = "hello") -> str:
    message = await say(sim, user, text, "pairing code")
    found = CODE.search(message.text)
    assert found is not None, message.text
    return found.group(0)


async def commonos(home: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k and "KEY" not in k}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env={**env, "COMMONOS_HOME": str(home)},
        cwd=home, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_stranger_gets_a_code_the_owner_approves_and_they_are_in(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    data_store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_text("Welcome, Carol."))
    await start()
    code = await get_code(telegram_sim, CAROL, "hello, my secret is 4711")
    assert code == await get_code(telegram_sim, CAROL, "/start")  # same code again
    assert model_server.requests == []
    assert await data_store.get_active_session(f"telegram:dm:{CAROL.id}") is None
    answer = await say(telegram_sim, ALICE, f"/pair approve {code}", "is in")
    assert answer.text == f"✅ Carol (telegram:{CAROL.id}) is in; I told them."
    await telegram_sim.wait_for_bot_message(CAROL.id, lambda m: m.text == YOU_ARE_IN)
    await say(telegram_sim, CAROL, "hi there", "Welcome, Carol.")
    [request] = model_server.requests
    assert request.messages[-1] == {"role": "user", "content": "hi there"}
    assert "4711" not in str(request.messages)  # nothing from before the approval


async def test_commonos_pair_approve_lets_them_in_and_they_are_told(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer, home: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("Hello from the agent."))
    await start()
    code = await get_code(telegram_sim, CAROL)
    status, out, err = await commonos(home, "pair", "list")
    assert status == 0 and f"telegram:{CAROL.id} Carol (expires in 60 minutes)" in out
    assert code not in out
    status, out, err = await commonos(home, "pair", "approve", code)
    assert (status, err) == (0, "")
    assert f"approved Carol (telegram:{CAROL.id})" in out
    await telegram_sim.wait_for_bot_message(CAROL.id, lambda m: m.text == YOU_ARE_IN)
    await say(telegram_sim, CAROL, "hi", "Hello from the agent.")


async def test_an_expired_or_wrong_code_does_nothing_and_says_so(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    data_store: SqliteStore,
) -> None:  # fmt: skip
    gateway = await start()
    code = await get_code(telegram_sim, CAROL)
    wrong = await say(telegram_sim, ALICE, "/pair approve ABCD-EFGH", "code")
    assert wrong.text == WRONG_CODE
    gateway.wall.ahead = TTL + 1
    expired = await say(telegram_sim, ALICE, f"/pair approve {code}", "expired")
    assert "Nothing changed" in expired.text
    assert await data_store.paired_users() == []
    fresh = await get_code(telegram_sim, CAROL, "still me")  # a new code, still no turn
    assert fresh != code
    assert model_server.requests == []
    assert not any(m.text == YOU_ARE_IN for m in telegram_sim.bot_messages(CAROL.id))


async def test_100_wrong_codes_from_one_user_never_block_another_users_pairing(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    model_server.script(reply_text("Hi Dave."))
    await start()
    for _ in range(100):
        await telegram_sim.user_says(BOB.id, "/pair approve ZZZZ-ZZZZ", user=BOB)
    await telegram_sim.wait_for(lambda: len(telegram_sim.bot_messages(BOB.id)) >= 100, 20)
    answers = [m.text for m in telegram_sim.bot_messages(BOB.id)]
    assert answers[:5] == [WRONG_CODE] * 5
    assert all(a.startswith("Too many wrong codes from you") for a in answers[5:])
    code = await get_code(telegram_sim, DAVE)
    approved = await say(telegram_sim, ALICE, f"/pair approve {code}", "is in")
    assert approved.text.startswith("✅ Dave")
    await telegram_sim.wait_for_bot_message(DAVE.id, lambda m: m.text == YOU_ARE_IN)
    await say(telegram_sim, DAVE, "hello", "Hi Dave.")


async def test_after_a_restart_the_paired_user_is_still_in(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    model_server.script(reply_text("Still here."))
    await start()
    code = await get_code(telegram_sim, CAROL)
    await say(telegram_sim, ALICE, f"/pair approve {code}", "is in")
    await telegram_sim.wait_for_bot_message(CAROL.id, lambda m: m.text == YOU_ARE_IN)
    await start()  # a restart on the same store
    await say(telegram_sim, CAROL, "are you there?", "Still here.")
    told = [m for m in telegram_sim.bot_messages(CAROL.id) if m.text == YOU_ARE_IN]
    assert len(told) == 1  # told once, not again at the restart


async def test_a_strangers_pair_command_and_group_messages_get_nothing(
    start: Start, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    await start()
    code = await get_code(telegram_sim, CAROL)
    reply = await say(telegram_sim, DAVE, f"/pair approve {code}", "pairing code")
    assert code not in reply.text  # the stranger's own code, nothing about Carol's
    group = -100777
    telegram_sim.add_group(group)
    said = await telegram_sim.user_says(group, "@test_bot let me in", user=CAROL)
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(int(said.event_id or 0)))
    assert telegram_sim.bot_messages(group) == []
    assert model_server.requests == []
