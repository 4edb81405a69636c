"""Telegram files across a kill -9 of ``commonos run`` (docs/attachments.md): a download
cut off mid-file is fetched again after the restart and its turn runs once; a file the
agent sends (``send_file``) killed while its upload was in flight is uploaded once more
(Telegram has no idempotency key: docs/architecture.md §9, "Exactly once"), and one
queued but not yet started — killed during the reply's send, or mid-turn while the model
was still answering — is sent exactly once."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from tests.platform_sim.base import Json
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.killed_run import (
    STORE_FILE,
    kill_in_flight,
    outbox,
    restarted,
    settled,
    write_config,
)
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.test_run_telegram import READY, TIMEOUT, gateway_process

NOTES = b"".join(b"line %d of the notes\n" % n for n in range(20_000))  # ~400 KiB: many chunks


@pytest.fixture
def home(tmp_path: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer) -> Path:
    write_config(
        tmp_path,
        model_server,
        f"""
[telegram]
token = "{telegram_sim.token}"
base_url = "{telegram_sim.url}/bot"
base_file_url = "{telegram_sim.url}/file/bot"
allowed_users = [{ALICE.id}]
streaming = "off"
""",
    )  # fmt: skip  (streaming off: the reply is the progress message edited, held below)
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


REPORT = "host,load\nweb-1,0.93\n"
ANSWER = "The report is on its way."


def send_the_report(model_server: ScriptedModelServer) -> None:
    """The turn: write the report, send it (queued), then the reply text."""
    model_server.script(
        reply_tool_call("write_file", {"path": "load.csv", "content": REPORT}, id="w"),
        reply_tool_call("send_file", {"path": "load.csv", "caption": "load"}, id="s"),
        reply_text(ANSWER),
    )


def queued_files(home: Path) -> list[tuple[bool, bool, str]]:
    """Each queued file: started, sent (a message id), the reason it was given up ("" if not)."""
    sql = "SELECT started_at, message_id, failed FROM queued_files ORDER BY queued_at"
    with contextlib.closing(sqlite3.connect(home / STORE_FILE, timeout=10)) as db:
        rows = list(db.execute(sql))
    return [(started is not None, message is not None, failed) for started, message, failed in rows]


def the_answer(params: Json) -> bool:
    return params.get("text") == ANSWER


def uploads(telegram_sim: TelegramSim) -> list[bytes]:
    return [f.file.data for f in telegram_sim.files.sent if f.method == "sendDocument"]


async def ask_for_the_report(telegram_sim: TelegramSim) -> None:
    await telegram_sim.user_says(ALICE.id, "send me the load report")


async def test_killed_while_the_upload_is_in_flight_it_is_uploaded_once_more_never_a_third(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    send_the_report(model_server)
    hold = telegram_sim.hold_next("sendDocument")
    await kill_in_flight(home, hold, lambda: ask_for_the_report(telegram_sim))
    assert uploads(telegram_sim) == [REPORT.encode()]  # Telegram has it; the gateway never heard
    assert queued_files(home) == [(True, False, "")]  # in flight: started, not known sent

    async with restarted(home):
        await settled(home, "telegram")
    assert len(model_server.requests) == 3  # the turn was not run again
    answers = [m.text for m in telegram_sim.bot_messages(ALICE.id)]
    assert answers.count(ANSWER) == 1 and outbox(home)[0][0] is not None
    assert uploads(telegram_sim) == [REPORT.encode()] * 2  # the documented window: once more
    assert queued_files(home) == [(True, True, "")]  # sent: no third upload on a later replay
    assert len(telegram_sim.calls_to("sendDocument")) == 2


async def test_killed_before_the_upload_began_the_file_is_sent_exactly_once(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    send_the_report(model_server)
    # the reply (the progress message edited into it), sent before the file
    hold = telegram_sim.hold_next("editMessageText", the_answer)
    await kill_in_flight(home, hold, lambda: ask_for_the_report(telegram_sim))
    assert uploads(telegram_sim) == []
    assert queued_files(home) == [(False, False, "")]  # queued, not started

    async with restarted(home):
        await settled(home, "telegram")
    assert len(model_server.requests) == 3  # the turn was not run again
    assert uploads(telegram_sim) == [REPORT.encode()]
    assert queued_files(home) == [(True, True, "")]
    (sent,) = telegram_sim.files.sent
    assert (sent.chat_id, sent.caption, sent.file.name) == (ALICE.id, "load", "load.csv")
    answers = [m for m in telegram_sim.bot_messages(ALICE.id) if m.text == ANSWER]
    assert len(answers) == 2  # the reply was in flight: §9's window for a chunk
    assert int(answers[-1].id) < sent.message_id  # the file after the reply, as before


async def kill_while_the_model_answers(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """Run the first gateway until the turn's last model call (after send_file queued the
    file) is on the wire, then SIGKILL it."""
    async with gateway_process(home) as first:
        await first.wait_for_line(READY)
        await ask_for_the_report(telegram_sim)
        await model_server.wait_for_requests(3, TIMEOUT)
        first.process.kill()
        assert await first.process.wait() == -9


async def test_killed_mid_turn_after_the_file_was_queued_it_is_sent_once_and_not_queued_again(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("write_file", {"path": "load.csv", "content": REPORT}, id="w"),
        reply_tool_call("send_file", {"path": "load.csv", "caption": "load"}, id="s"),
        reply_hang(),  # the answer after the file was queued: never comes
    )
    await kill_while_the_model_answers(home, telegram_sim, model_server)
    assert queued_files(home) == [(False, False, "")] and uploads(telegram_sim) == []

    model_server.script(reply_text(ANSWER))
    async with restarted(home):
        await settled(home, "telegram")
    assert len(model_server.requests) == 4  # resumed: only the unanswered model call again
    resumed = [m for m in model_server.requests[3].messages if m["role"] == "tool"]
    assert str(resumed[-1]["content"]).startswith("Queued load.csv")  # the call's own result
    answers = [m for m in telegram_sim.bot_messages(ALICE.id) if m.text == ANSWER]
    assert len(answers) == 1
    assert uploads(telegram_sim) == [REPORT.encode()]
    assert queued_files(home) == [(True, True, "")]
    assert int(answers[0].id) < telegram_sim.files.sent[0].message_id
