"""End to end, ``commonos run`` as a real process: killed (SIGKILL) while an answer is
streamed on Discord — the partial message is shown and recorded — the restarted process
replays the turn and edits that message into the answer: the channel shows the answer once,
in the cut message's place, and no cut copy (issue 28 point 7; docs/architecture.md §13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.killed_run import restarted, settled, write_config
from tests.support.killed_stream import PARTIAL, kept_streams, kill_mid_stream
from tests.support.killed_stream import script_cut_then_whole as script
from tests.support.model_server import ScriptedModelServer

QUESTION = "tell me the answer"
REST = "and here it is in full."


@pytest.fixture
def home(tmp_path: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[discord]
token = "{discord_sim.token}"
api_base = "{discord_sim.api_base}"
gateway_url = "{discord_sim.gateway_url}"
allowed_users = ["{ALICE.id}"]
streaming = "native"  # Discord: a message edited in place
""")  # fmt: skip
    return tmp_path


async def test_killed_mid_stream_the_partial_message_becomes_the_answer_after_the_restart(
    home: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    script(model_server, REST)
    dm = discord_sim.dm_channel(ALICE)

    def partial_shown() -> bool:
        return any(m.text.startswith(PARTIAL.strip()) for m in discord_sim.bot_messages(dm))

    await kill_mid_stream(home, lambda: discord_sim.user_says(dm, QUESTION), partial_shown)
    [cut] = discord_sim.bot_messages(dm)
    assert cut.text != PARTIAL + REST
    assert [key for key, _ in kept_streams(home)] and kept_streams(home)[0][1] == cut.id

    async with restarted(home):
        await settled(home, "discord")
    assert [(m.id, m.text) for m in discord_sim.bot_messages(dm)] == [(cut.id, PARTIAL + REST)]
    assert kept_streams(home) == []  # forgotten once the answer was delivered
    assert len(model_server.requests) == 2
