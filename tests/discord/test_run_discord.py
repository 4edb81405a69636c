"""``commonos run`` as a real process with a ``[discord]`` section: the CLI builds the
Discord adapter from the platform registry, reaches the simulator through the configured
``api_base`` and ``gateway_url`` (the fixture's in-process patch of discord.py does not
reach a subprocess) and answers a DM with the offline demo model; the token never reaches
the log."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.test_run_telegram import READY, TIMEOUT, gateway_process


@pytest.fixture
def home(tmp_path: Path, discord_sim: DiscordSim) -> Path:
    (tmp_path / "config.toml").write_text(
        f"""
[gateway]
log_level = "DEBUG"

[web]
enabled = false

[discord]
token = "{discord_sim.token}"
api_base = "{discord_sim.api_base}"
gateway_url = "{discord_sim.gateway_url}"
allowed_users = ["{ALICE.id}"]
"""
    )
    return tmp_path


async def test_run_answers_a_discord_dm_and_stops_cleanly(
    home: Path, discord_sim: DiscordSim
) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        dm = discord_sim.dm_channel(ALICE)
        await discord_sim.user_says(dm, "hello there")
        reply = await discord_sim.wait_for_bot_message(dm, timeout=TIMEOUT)
        assert "demo" in reply.text.lower()
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.process.wait() == 0
    assert "discord: receiving as" in gateway.log
    assert discord_sim.gateway.identify, "the process identified on the configured gateway"
    assert discord_sim.calls_to("put_commands"), "the slash commands were synced"
    assert discord_sim.token not in gateway.log
