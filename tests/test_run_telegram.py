"""``commonos run`` as a real process, talking to the Telegram simulator.

The whole product from the outside: config file → CLI → store → engine (demo provider)
→ Telegram adapter (real python-telegram-bot) → a reply in the chat; and the bot token,
which PTB puts in every request URL, never appears in the log even at DEBUG level.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.tools.sandbox import Workspaces
from tests.platform_sim.telegram_sim import TelegramSim
from tests.platform_sim.telegram_types import ALICE, BOB

TIMEOUT = 30.0
READY = "ready: the gateway is running"


@dataclass
class RunningGateway:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def drain(self) -> None:
        """Read stderr to the end, so a chatty log never blocks the process."""
        assert self.process.stderr is not None
        while raw := await self.process.stderr.readline():
            self.lines.append(raw.decode())
            self.changed.set()

    async def wait_for_line(self, needle: str) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not any(needle in line for line in self.lines):
                if self.process.returncode is not None:
                    raise AssertionError("gateway exited:\n" + self.log)
                self.changed.clear()
                await self.changed.wait()

    @property
    def log(self) -> str:
        return "".join(self.lines)


def write_config(home: Path, sim: TelegramSim) -> None:
    (home / "config.toml").write_text(
        f"""
[gateway]
log_level = "DEBUG"

[telegram]
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{ALICE.id}]
"""
    )


def environment(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    keep = {k: v for k, v in keep.items() if not k.startswith(("COMMONOS_", "OPENAI_"))}
    return {**keep, "COMMONOS_HOME": str(home)}


@contextlib.asynccontextmanager
async def gateway_process(home: Path) -> AsyncIterator[RunningGateway]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run",
        env=environment(home), cwd=home, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = RunningGateway(process)
    reader = asyncio.create_task(running.drain())
    try:
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), TIMEOUT)
        await asyncio.wait_for(reader, TIMEOUT)


@pytest.fixture
def home(tmp_path: Path, telegram_sim: TelegramSim) -> Path:
    write_config(tmp_path, telegram_sim)
    return tmp_path


async def test_run_answers_a_telegram_dm_and_stops_cleanly(
    home: Path, telegram_sim: TelegramSim
) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, "hello there")
        reply = await telegram_sim.wait_for_bot_message(ALICE.id, timeout=TIMEOUT)
        assert "demo" in reply.text.lower()
        # python-telegram-bot's Passport decryption is never loaded (adapters/telegram/platform.py)
        maps = await asyncio.to_thread(Path(f"/proc/{gateway.process.pid}/maps").read_text)
        assert "/cryptography/" not in maps
        gateway.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(gateway.process.wait(), TIMEOUT) == 0
    assert "store closed" in gateway.log
    assert (home / "commonos.db").exists()


async def test_run_never_logs_the_bot_token(home: Path, telegram_sim: TelegramSim) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, "hello")
        await telegram_sim.wait_for_bot_message(ALICE.id, timeout=TIMEOUT)
    assert "getUpdates" in gateway.log, "DEBUG logging should show the Bot API requests"
    assert telegram_sim.token not in gateway.log


async def test_run_denies_an_unknown_user_and_tells_the_operator(
    home: Path, telegram_sim: TelegramSim
) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(BOB.id, "let me in")
        await gateway.wait_for_line(f"to allow them add '{BOB.id}' to [telegram] allowed_users")
        await telegram_sim.user_says(ALICE.id, "and me?")
        await telegram_sim.wait_for_bot_message(ALICE.id, timeout=TIMEOUT)
    assert telegram_sim.bot_messages(BOB.id) == []


async def test_demo_runs_a_command_in_the_workspace_and_reports_its_output(
    home: Path, telegram_sim: TelegramSim
) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, "run: echo hello-from-the-workspace")
        reply = await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: "hello-from-the-workspace" in m.text and "demo" in m.text.lower(),
            timeout=TIMEOUT,
        )  # fmt: skip
    assert not reply.deleted and not reply.buttons


async def test_demo_dangerous_command_waits_for_the_approval_button(
    home: Path, telegram_sim: TelegramSim
) -> None:
    workspaces = Workspaces(home / "workspaces" / "default")
    scratch = workspaces.path_for(f"telegram:dm:{ALICE.id}") / "scratch"
    scratch.mkdir(parents=True)
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, "run: rm -rf ./scratch")
        card = await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: bool(m.buttons), timeout=TIMEOUT
        )
        assert scratch.exists(), "nothing runs before the press"
        approve = next(b for b in card.buttons if "Approve" in b.label)
        await telegram_sim.press_button(card, approve.data or "", user=ALICE)
        await telegram_sim.wait_for(lambda: not card.buttons, timeout=TIMEOUT)
        assert "Approved by Alice" in card.text
        await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: m is not card and "demo" in m.text.lower(), timeout=TIMEOUT
        )
    assert not scratch.exists()
