"""End to end, ``commonos run`` as a real process: killed (SIGKILL) while an answer is
streamed as a Slack chat stream in a thread — the stream is live with the first words and
recorded — the restarted process replays the turn and puts the answer in the stream's own
message (stopped, then ``chat.update``): the thread shows the answer once, no cut copy
(issue 28 point 7; docs/architecture.md §13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.support.killed_run import restarted, settled, write_config
from tests.support.killed_stream import PARTIAL, kept_streams, kill_mid_stream
from tests.support.killed_stream import script_cut_then_whole as script
from tests.support.model_server import ScriptedModelServer

QUESTION = "tell me the answer"
REST = "and here it is in full."


@pytest.fixture
def home(tmp_path: Path, slack_sim: SlackSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[slack]
bot_token = "{slack_sim.bot_token}"
app_token = "{slack_sim.app_token}"
api_base_url = "{slack_sim.api_url}"
allowed_users = ["{ALICE.id}"]
streaming = "native"
""")  # fmt: skip
    return tmp_path


async def test_killed_mid_stream_the_streams_own_message_becomes_the_answer_after_the_restart(
    home: Path, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    script(model_server, REST)

    def partial_shown() -> bool:
        streams = slack_sim.streams.values()
        return any(s.live and s.text.startswith(PARTIAL.strip()) for s in streams)

    async def mention() -> None:
        await slack_sim.user_says(GENERAL, f"{slack_sim.mention} {QUESTION}")

    await kill_mid_stream(home, mention, partial_shown)
    [cut] = slack_sim.streams.values()  # left live by the killed process
    assert cut.live and kept_streams(home)[0][1] == cut.ts

    async with restarted(home):
        await settled(home, "slack")
    shown = [m for m in slack_sim.bot_messages(GENERAL) if not m.deleted]
    assert [(m.id, m.text) for m in shown] == [(cut.ts, PARTIAL + REST)]  # its own message
    assert not cut.live
    assert kept_streams(home) == []
    assert len(model_server.requests) == 2
