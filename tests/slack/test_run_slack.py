"""``commonos run`` as a real process with a ``[slack]`` section: the CLI builds the Slack
adapter from the platform registry and a DM and a channel mention are answered (Socket Mode
against the simulator, the offline demo model); the tokens never reach the log."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.test_run_telegram import READY, TIMEOUT, gateway_process


@pytest.fixture
def home(tmp_path: Path, slack_sim: SlackSim) -> Path:
    (tmp_path / "config.toml").write_text(
        f"""
[gateway]
log_level = "DEBUG"

[web]
enabled = false

[slack]
bot_token = "{slack_sim.bot_token}"
app_token = "{slack_sim.app_token}"
api_base_url = "{slack_sim.api_url}"
allowed_users = ["{ALICE.id}"]
"""
    )
    return tmp_path


async def test_run_answers_slack_in_a_dm_and_in_a_thread(home: Path, slack_sim: SlackSim) -> None:
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        dm = slack_sim.dm_channel(ALICE)
        await slack_sim.user_says(dm, "hello there")
        reply = await slack_sim.wait_for_bot_message(dm, timeout=TIMEOUT)
        assert "demo" in reply.text.lower()
        asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} and here?")
        answer = await slack_sim.wait_for_bot_message(
            GENERAL, lambda m: m.thread == asked.id, timeout=TIMEOUT
        )
        assert "demo" in answer.text.lower()
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.process.wait() == 0
    assert "slack: receiving as" in gateway.log
    assert slack_sim.bot_token not in gateway.log and slack_sim.app_token not in gateway.log
