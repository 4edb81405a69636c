"""End to end on Telegram: photos, albums, documents and voice notes reach the model through
the real python-telegram-bot, the simulator's getFile and download route, the gateway's
intake and the scripted model server (docs/attachments.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.redaction import remember_secrets
from gateway.turns.intake import Attachments, IntakeLimits
from gateway.turns.transcription import Transcriber, TranscriptionConfig
from tests.platform_sim.telegram_files import MB, Media, png
from tests.platform_sim.telegram_sim import ALICE, TelegramSim, TgUser
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.support.polling import until
from tests.support.transcription_server import ScriptedTranscriptionServer, transcript
from tests.telegram.harness import AlbumGate, GatewayFactory

DM = ALICE.id
KEY = f"telegram:dm:{ALICE.id}"
MALLORY = TgUser(66, "Mallory", "mallory")


def user_content(model_server: ScriptedModelServer, index: int = 0) -> Any:
    return model_server.requests[index].messages[-1]["content"]


def as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def inbox(workspace: Path) -> list[Path]:
    folder = workspace / "inbox"
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


async def test_a_photo_with_a_caption_is_an_image_part_for_a_vision_profile(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("A grey square."))
    run = await gateway(vision=True)
    image = png(8, 6)
    await telegram_sim.user_sends(DM, "photo", image, caption="what is this?")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "grey square" in m.text)
    content = user_content(model_server)
    assert isinstance(content, list)
    assert "what is this?" in as_text(content)
    assert any(p.get("type") == "image_url" for p in content)
    (saved,) = inbox(run.workspace)
    assert saved.read_bytes() == image
    await run.idle(KEY)


async def test_a_photo_is_a_note_with_its_path_for_a_profile_without_vision(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Saved it."))
    run = await gateway()
    await telegram_sim.user_sends(DM, "photo", png(), caption="keep this")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Saved it" in m.text)
    content = user_content(model_server)
    text = as_text(content)
    (saved,) = inbox(run.workspace)
    assert "keep this" in text and f"inbox/{saved.name}" in text
    assert "image_url" not in str(content)
    await run.idle(KEY)


async def test_an_album_of_three_photos_is_one_turn(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Three pictures."))
    gate = AlbumGate()
    run = await gateway(telegram={"album_sleep": gate.sleep})
    parts = [Media("photo", png(2, 2)), Media("photo", png(3, 3)), Media("photo", png(4, 4))]
    await telegram_sim.user_sends_album(DM, parts, caption="my album")
    await until(lambda: run.adapter.album_parts_waiting() == 3)
    gate.opened.set()
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Three pictures" in m.text)
    await run.idle(KEY)
    assert len(model_server.requests) == 1
    assert len(inbox(run.workspace)) == 3
    assert as_text(user_content(model_server)).count("inbox/") == 3


async def test_a_pdf_is_noted_with_its_path_and_a_small_text_file_inlined(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("A report."), reply_text("A log."))
    run = await gateway()
    await telegram_sim.user_sends(DM, "document", b"%PDF-1.7\n", name="report.pdf",
                                  mime="application/pdf")  # fmt: skip
    await telegram_sim.wait_for_bot_message(DM, lambda m: "A report" in m.text)
    await run.idle(KEY)
    await telegram_sim.user_sends(DM, "document", b"ERROR disk full\n", name="app.log",
                                  mime="text/plain", caption="why?")  # fmt: skip
    await telegram_sim.wait_for_bot_message(DM, lambda m: "A log" in m.text)
    await run.idle(KEY)
    pdf_note, log_note = (
        as_text(user_content(model_server, 0)),
        as_text(user_content(model_server, 1)),
    )
    assert "report.pdf" in pdf_note and "inbox/report.pdf" in pdf_note
    assert "ERROR disk full" in log_note and "why?" in log_note


async def test_a_voice_note_is_transcribed_once_and_is_the_user_message(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Restarting it now."))
    async with ScriptedTranscriptionServer() as speech:
        speech.script(transcript("please restart the web server"))
        transcriber = Transcriber(TranscriptionConfig(base_url=speech.url))
        run = await gateway(attachments=Attachments(transcriber=transcriber))
        await telegram_sim.user_sends(DM, "voice", b"OggS fake opus")
        await telegram_sim.wait_for_bot_message(DM, lambda m: "Restarting" in m.text)
        await run.idle(KEY)
        assert len(await speech.wait_for_uploads(1)) == 1
    echo = [m.text for m in telegram_sim.bot_messages(DM) if "🎤" in m.text]
    assert echo == ["🎤 please restart the web server"]
    assert "please restart the web server" in as_text(user_content(model_server))


async def test_a_voice_note_without_transcription_gets_the_explanatory_reply(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway()
    await telegram_sim.user_sends(DM, "voice", b"OggS fake opus")
    reply = await telegram_sim.wait_for_bot_message(DM, lambda m: "[transcription]" in m.text)
    await run.idle(KEY)
    assert model_server.requests == [] and len(telegram_sim.bot_messages(DM)) == 1
    assert reply.text


async def test_an_over_limit_file_gets_one_reply_naming_it_and_is_never_downloaded(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Got the text."))
    run = await gateway(attachments=Attachments(limits=IntakeLimits(max_bytes=1000)))
    said = await telegram_sim.user_sends(DM, "document", b"x" * 2000, name="huge.csv",
                                         caption="and read this")  # fmt: skip
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Got the text" in m.text)
    await run.idle(KEY)
    refusals = [m.text for m in telegram_sim.bot_messages(DM) if "huge.csv" in m.text]
    assert len(refusals) == 1
    assert telegram_sim.files.downloads[said.raw["document"]["file_id"]] == 0
    assert inbox(run.workspace) == []


async def test_a_failed_download_gets_one_reply_naming_telegrams_limit(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway(attachments=Attachments(limits=IntakeLimits(max_bytes=100 * MB)))
    said = await telegram_sim.user_sends(DM, "video", b"x", name="film.mp4", size=30 * MB)
    reply = await telegram_sim.wait_for_bot_message(DM, lambda m: "film.mp4" in m.text)
    await run.idle(KEY)
    assert "20 MB" in reply.text and len(telegram_sim.bot_messages(DM)) == 1
    assert telegram_sim.files.downloads[said.raw["video"]["file_id"]] == 0
    assert model_server.requests == [] and inbox(run.workspace) == []


async def test_a_hostile_file_name_is_saved_harmless_inside_the_workspace(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("Saved."))
    run = await gateway()
    before = files_under(tmp_path)
    hostile = "../../outside\u202etxt.exe\x00" + "b" * 400 + ".txt"
    await telegram_sim.user_sends(DM, "document", b"hello\n", name=hostile, caption="file")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Saved" in m.text)
    await run.idle(KEY)
    (saved,) = inbox(run.workspace)
    assert saved.read_bytes() == b"hello\n" and len(saved.name) <= 120
    assert "\u202e" not in saved.name and saved.name.endswith(".txt")
    written = files_under(tmp_path) - before
    store_files = {"store.db", "store.db-wal", "store.db-shm", "store.db-journal"}
    outside = {p for p in written if run.workspace not in p.parents and p.name not in store_files}
    assert outside == set()


async def test_a_strangers_attachment_is_never_downloaded(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway()
    said = await telegram_sim.user_sends(MALLORY.id, "document", b"evil", name="x.sh", user=MALLORY)
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(int(said.event_id or 0)))
    await run.adapter.drain()
    file_id = said.raw["document"]["file_id"]
    assert telegram_sim.files.get_file_calls[file_id] == 0
    assert telegram_sim.files.downloads[file_id] == 0
    assert model_server.requests == [] and inbox(run.workspace) == []


# files the agent sends (send_file) ---------------------------------------------------------
GROUP = -100777
TOPIC = 7
CSV = b"host,disk\nweb-1,91%\n"


def tool_results(model_server: ScriptedModelServer, request: int) -> list[str]:
    messages = model_server.requests[request].messages
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


async def test_send_file_delivers_a_written_file_once_after_the_reply_in_its_topic(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("write_file", {"path": "disk.csv", "content": CSV.decode()}, id="w"),
        reply_tool_call("send_file", {"path": "disk.csv", "caption": "disk usage"}, id="s"),
        reply_text("Here is the report."),
    )
    run = await gateway()
    telegram_sim.add_group(GROUP, "Ops", forum=True)
    await telegram_sim.user_says(GROUP, "@test_bot send me the disk report", thread=TOPIC)
    reply = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Here is" in m.text)
    await telegram_sim.wait_for(lambda: telegram_sim.files.sent)
    await run.idle(f"telegram:thread:{GROUP}:{TOPIC}")
    (sent,) = telegram_sim.files.sent
    assert (sent.method, sent.chat_id, sent.thread) == ("sendDocument", GROUP, TOPIC)
    assert (sent.file.data, sent.file.name, sent.caption) == (CSV, "disk.csv", "disk usage")
    assert reply.thread == str(TOPIC) and int(reply.id) < sent.message_id
    (queued,) = tool_results(model_server, 2)[-1:]
    assert queued.startswith("Queued disk.csv") and "with your reply" in queued
    assert len(telegram_sim.calls_to("sendDocument")) == 1


async def test_send_file_sends_a_picture_as_a_photo(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    picture = png(16, 9)
    model_server.script(
        reply_tool_call("send_file", {"path": "charts/cpu.png", "caption": "CPU"}),
        reply_text("Sent the chart."),
    )
    run = await gateway()
    (run.workspace / "charts").mkdir()
    (run.workspace / "charts" / "cpu.png").write_bytes(picture)
    await telegram_sim.user_says(DM, "chart please")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Sent the chart" in m.text)
    await telegram_sim.wait_for(lambda: telegram_sim.files.sent)
    await run.idle(KEY)
    (sent,) = telegram_sim.files.sent
    assert (sent.method, sent.chat_id, sent.thread, sent.caption) == ("sendPhoto", DM, None, "CPU")
    assert sent.file.data == picture
    assert telegram_sim.calls_to("sendDocument") == []


async def test_a_text_file_holding_the_bot_token_is_sent_redacted(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    token = telegram_sim.token
    remember_secrets([token])  # as the wiring does with every configured secret
    model_server.script(reply_tool_call("send_file", {"path": ".env"}), reply_text("Done."))
    run = await gateway()
    (run.workspace / ".env").write_text(f"TELEGRAM_TOKEN={token}\nMODE=prod\n")
    await telegram_sim.user_says(DM, "send me the .env")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Done" in m.text)
    await telegram_sim.wait_for(lambda: telegram_sim.files.sent)
    await run.idle(KEY)
    (sent,) = telegram_sim.files.sent
    assert sent.file.data == b"TELEGRAM_TOKEN=[REDACTED]\nMODE=prod\n"
    uploaded = b"".join(f.data for f in telegram_sim.files.by_id.values())
    assert token.encode() not in uploaded and token.split(":")[1].encode() not in uploaded
    (folder,) = run.service.files.spool.root.iterdir()  # the gateway's spool, one file key
    (kept,) = folder.iterdir()
    assert token not in kept.read_text()
    assert sorted(p.name for p in run.workspace.iterdir()) == [".env"]  # nothing added there


async def test_a_binary_file_holding_the_bot_token_is_refused_and_nothing_uploaded(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    token = telegram_sim.token
    remember_secrets([token])
    model_server.script(reply_tool_call("send_file", {"path": "dump.bin"}), reply_text("Sorry."))
    run = await gateway()
    (run.workspace / "dump.bin").write_bytes(b"\x00\xff\x10" + token.encode() + b"\x00\x9c")
    await telegram_sim.user_says(DM, "send me the dump")
    await telegram_sim.wait_for_bot_message(DM, lambda m: "Sorry" in m.text)
    await run.idle(KEY)
    (refusal,) = tool_results(model_server, 1)
    assert refusal == "send_file: dump.bin holds a configured secret; not sent"
    assert telegram_sim.files.sent == []
    assert telegram_sim.calls_to("sendDocument") == telegram_sim.calls_to("sendPhoto") == []
    spool = run.service.files.spool.root
    assert not spool.exists() or list(spool.iterdir()) == []
    assert sorted(p.name for p in run.workspace.iterdir()) == ["dump.bin"]
