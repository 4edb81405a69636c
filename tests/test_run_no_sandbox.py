"""``commonos run`` on a machine without bubblewrap (a real process whose PATH has no
``bwrap``): one start-up line says so, the gateway still starts, and the demo still shows
its approval card — then the terminal reports that no sandbox is available, and nothing
runs on the host."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from core.tools.sandbox import Workspaces
from tests.platform_sim.telegram_sim import TelegramSim
from tests.platform_sim.telegram_types import ALICE
from tests.test_run_telegram import READY, TIMEOUT, RunningGateway, environment, write_config

REFUSAL = (
    "profile default: bubblewrap (bwrap) is not installed — the terminal tool will refuse "
    "to run commands; install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), "
    'or set sandbox = "none" in [profiles.default]'
)
NO_SANDBOX = "No sandbox is available, so the command was not run"


@contextlib.asynccontextmanager
async def gateway_without_bwrap(home: Path) -> AsyncIterator[RunningGateway]:
    empty = home / "empty-bin"
    empty.mkdir()
    env = {**environment(home), "PATH": str(empty)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run", env=env, cwd=home, stderr=asyncio.subprocess.PIPE
    )
    running = RunningGateway(process)
    reader = asyncio.create_task(running.drain())
    try:
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), TIMEOUT)
        await asyncio.wait_for(reader, TIMEOUT)


async def test_without_bubblewrap_run_says_so_in_one_line_and_still_starts(
    tmp_path: Path, telegram_sim: TelegramSim
) -> None:
    write_config(tmp_path, telegram_sim)
    async with gateway_without_bwrap(tmp_path) as gateway:
        await gateway.wait_for_line(READY)
    refusals = [line for line in gateway.lines if REFUSAL in line]
    assert len(refusals) == 1 and refusals[0].rstrip("\n").endswith(REFUSAL)
    assert " ERROR " in refusals[0]


async def test_without_bubblewrap_the_demo_asks_then_reports_no_sandbox(
    tmp_path: Path, telegram_sim: TelegramSim
) -> None:
    write_config(tmp_path, telegram_sim)
    workspace = Workspaces(tmp_path / "workspaces" / "default").path_for(f"telegram:dm:{ALICE.id}")
    scratch = workspace / "scratch"
    scratch.mkdir(parents=True)
    async with gateway_without_bwrap(tmp_path) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, "run: rm -rf ./scratch")
        card = await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: bool(m.buttons), timeout=TIMEOUT
        )
        approve = next(b for b in card.buttons if "Approve" in b.label)
        await telegram_sim.press_button(card, approve.data or "", user=ALICE)
        reply = await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: m is not card and NO_SANDBOX in m.text, timeout=TIMEOUT
        )
    assert "bubblewrap (bwrap) is not installed" in reply.text
    assert await asyncio.to_thread(scratch.exists), "nothing ran on the host"
