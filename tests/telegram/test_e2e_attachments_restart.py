"""Telegram files across a kill -9 of ``commonos run`` (docs/attachments.md): a download
cut off mid-file is fetched again after the restart and its turn runs once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.killed_run import kill_in_flight, restarted, settled, write_config
from tests.support.model_server import ScriptedModelServer, reply_text

NOTES = b"".join(b"line %d of the notes\n" % n for n in range(20_000))  # ~400 KiB: many chunks


@pytest.fixture
def home(tmp_path: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[telegram]
token = "{telegram_sim.token}"
base_url = "{telegram_sim.url}/bot"
base_file_url = "{telegram_sim.url}/file/bot"
allowed_users = [{ALICE.id}]
""")  # fmt: skip
    return tmp_path


def saved_copies(home: Path, name: str) -> list[Path]:
    return [p for p in home.rglob(name) if p.is_file()]


async def test_killed_mid_download_the_file_is_fetched_again_and_the_turn_runs_once(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Twenty thousand lines."))
    hold = telegram_sim.hold_next("download")
    sent: list[str] = []

    async def ask() -> None:
        said = await telegram_sim.user_sends(ALICE.id, "document", NOTES, name="notes.txt",
                                             mime="text/plain", caption="how long?")  # fmt: skip
        sent.append(said.raw["document"]["file_id"])

    await kill_in_flight(home, hold, ask)
    assert model_server.requests == [] and saved_copies(home, "notes.txt") == []

    async with restarted(home):
        await settled(home, "telegram")
    (file_id,) = sent
    assert telegram_sim.files.downloads[file_id] == 2  # the one cut off, then the whole file
    assert len(model_server.requests) == 1
    (copy,) = saved_copies(home, "notes.txt")
    assert copy.read_bytes() == NOTES and copy.parent.name == "inbox"
    assert [p for p in copy.parent.iterdir() if p.name.startswith(".partial")] == []
    answers = [m.text for m in telegram_sim.bot_messages(ALICE.id)]
    assert answers.count("Twenty thousand lines.") == 1
