"""End to end, ``commonos run`` as a real process: killed (SIGKILL) while a reply chunk's
``POST /channels/{id}/messages`` is in flight — Discord made the message, the gateway never
heard — the restarted process sends the chunk again with the same ``nonce`` and
``enforce_nonce``; Discord returns the message it made, so the channel shows it once, the
outbox records that message, and the model is asked once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_sim.base import Json
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.killed_run import kill_in_flight, outbox, restarted, settled, write_config
from tests.support.model_server import ScriptedModelServer, reply_text

QUESTION = "what is 6 x 7?"
ANSWER = "Forty-two, shown once."


@pytest.fixture
def home(tmp_path: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[discord]
token = "{discord_sim.token}"
api_base = "{discord_sim.api_base}"
gateway_url = "{discord_sim.gateway_url}"
allowed_users = ["{ALICE.id}"]
streaming = "off"  # the reply is its own POST (streamed, it would be an edit)
""")  # fmt: skip
    return tmp_path


def the_answer(body: Json) -> bool:
    return body.get("content") == ANSWER


async def test_killed_while_the_reply_is_in_flight_discord_shows_it_once_after_the_restart(
    home: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    dm = discord_sim.dm_channel(ALICE)
    hold = discord_sim.hold_next("create_message", the_answer)
    await kill_in_flight(home, hold, lambda: discord_sim.user_says(dm, QUESTION))
    [made] = discord_sim.bot_messages(dm)  # Discord has it; the killed process never heard
    assert outbox(home) == [(None, True)]  # in flight: started, not known sent

    async with restarted(home):
        await settled(home, "discord")
    sends = [c for c in discord_sim.calls_to("create_message") if the_answer(c.params)]
    assert len(sends) == 2  # sent again after the restart ...
    assert sends[0].params["nonce"] == sends[1].params["nonce"]  # ... with the same nonce
    assert sends[1].params["enforce_nonce"] is True
    assert [m.text for m in discord_sim.bot_messages(dm)] == [ANSWER]  # shown once
    assert outbox(home) == [(made.id, True)]  # the message Discord returned
    assert len(model_server.requests) == 1  # never generated again
