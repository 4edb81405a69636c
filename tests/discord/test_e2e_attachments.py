"""End to end on Discord: attachments and voice messages reach the model, and files the agent
sends arrive once, through the real discord.py, the simulator's CDN and multipart uploads,
the gateway's intake and file delivery and the scripted model server
(docs/attachments.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.discord.conftest import GatewayFactory
from tests.discord.harness import Gateway, dm_key
from tests.platform_sim.base import Call, Json
from tests.platform_sim.discord_payloads import DcUser
from tests.platform_sim.discord_sim import ALICE, DiscordSim, Upload
from tests.support.killed_run import kill_in_flight, restarted, settled, write_config
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.support.transcription_server import ScriptedTranscriptionServer, transcript
from tests.test_run_telegram import TIMEOUT

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
MALLORY = DcUser("3099", "mallory")


def user_content(model_server: ScriptedModelServer, index: int = 0) -> Any:
    return model_server.requests[index].messages[-1]["content"]


def as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def inbox(run: Gateway, key: str) -> list[Path]:
    folder = run.workspace(key) / "inbox"
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )


async def test_an_image_is_an_image_part_for_a_vision_profile(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("A tiny picture."))
    run = await gateway(profile={"vision": True})
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "what is this?", files=[Upload("shot.png", PNG)])
    await discord_sim.wait_for_bot_message(dm, lambda m: "tiny picture" in m.text)
    await run.idle(dm_key(dm.id))
    content = user_content(model_server)
    assert "what is this?" in as_text(content)
    assert any(p.get("type") == "image_url" for p in content)
    (saved,) = inbox(run, dm_key(dm.id))
    assert saved.read_bytes() == PNG and list(discord_sim.cdn.downloads.values()) == [1]


async def test_an_image_is_a_note_with_its_path_without_vision_and_a_pdf_is_noted(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Saved both."))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE)
    files = [Upload("shot.png", PNG), Upload("report.pdf", b"%PDF-1.7\n")]
    await discord_sim.user_says(dm, "", files=files)  # files only, no text
    await discord_sim.wait_for_bot_message(dm, lambda m: "Saved both" in m.text)
    await run.idle(dm_key(dm.id))
    text, content = as_text(user_content(model_server)), user_content(model_server)
    assert "image_url" not in str(content)
    assert "inbox/shot.png" in text and "inbox/report.pdf" in text and "application/pdf" in text
    assert [p.name for p in inbox(run, dm_key(dm.id))] == ["report.pdf", "shot.png"]


async def test_a_voice_message_is_transcribed_once_and_is_the_user_message(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Deploying now."))
    async with ScriptedTranscriptionServer() as speech:
        speech.script(transcript("please deploy the staging branch"))
        run = await gateway(transcription={"base_url": speech.url})
        dm = discord_sim.dm_channel(ALICE)
        await discord_sim.user_voice_message(dm, b"OggS fake opus")
        await discord_sim.wait_for_bot_message(dm, lambda m: "Deploying" in m.text)
        await run.idle(dm_key(dm.id))
        (upload,) = await speech.wait_for_uploads(1)
    assert str(upload.file_name).endswith(".ogg") and len(speech.uploads) == 1
    echoes = [m.text for m in discord_sim.bot_messages(dm) if "🎤" in m.text]
    assert echoes == ["🎤 please deploy the staging branch"]
    assert "please deploy the staging branch" in as_text(user_content(model_server))


async def test_an_over_limit_file_gets_one_reply_and_is_never_downloaded(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Read the text."))
    run = await gateway(attachments={"max_bytes": 1000})
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "and this?", files=[Upload("huge.csv", b"x" * 2000)])
    await discord_sim.wait_for_bot_message(dm, lambda m: "Read the text" in m.text)
    await run.idle(dm_key(dm.id))
    refusals = [m.text for m in discord_sim.bot_messages(dm) if "huge.csv" in m.text]
    assert len(refusals) == 1 and "limit" in refusals[0]
    assert discord_sim.cdn.downloads == {} and inbox(run, dm_key(dm.id)) == []
    assert "and this?" in as_text(user_content(model_server))


async def test_an_expired_link_gets_one_reply_naming_the_file(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE)
    discord_sim.cdn.lifetime = 0  # the link is stale when the gateway gets it
    await discord_sim.user_says(dm, "", files=[Upload("old.log", b"log")])
    reply = await discord_sim.wait_for_bot_message(dm, lambda m: "old.log" in m.text)
    await run.idle(dm_key(dm.id))
    assert "Discord no longer has the file" in reply.text
    assert model_server.requests == [] and len(discord_sim.bot_messages(dm)) == 1


async def test_a_strangers_attachment_is_never_downloaded(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway()
    dm = discord_sim.dm_channel(MALLORY)
    said = await discord_sim.user_says(dm, "", files=[Upload("x.sh", b"evil")], user=MALLORY)
    await discord_sim.gateway.barrier()
    await run.adapter.drain()
    assert discord_sim.cdn.downloads == {} and model_server.requests == []
    assert said.raw["attachments"] and inbox(run, dm_key(dm.id)) == []


# files the agent sends (send_file) ---------------------------------------------------------
REPORT = "host,load\nweb-1,0.93\n"
ANSWER = "The report is on its way."


def send_the_report(model_server: ScriptedModelServer) -> None:
    """The turn: write the report, send it (queued), then the reply text."""
    model_server.script(
        reply_tool_call("write_file", {"path": "load.csv", "content": REPORT}, id="w"),
        reply_tool_call("send_file", {"path": "load.csv", "caption": "load"}, id="s"),
        reply_text(ANSWER),
    )


def uploads(sim: DiscordSim, channel: str) -> list[tuple[str, bytes, str]]:
    """Each bot message's files: (name, bytes, the message's text)."""
    return [(a["filename"], sim.file_of(a).data, m.text) for m in sim.bot_messages(channel)
            for a in m.raw["attachments"]]  # fmt: skip


async def test_send_file_delivers_the_file_once_after_the_reply(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    send_the_report(model_server)
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "send me the load report")
    reply = await discord_sim.wait_for_bot_message(dm, lambda m: m.text == ANSWER)
    await discord_sim.wait_for(lambda: uploads(discord_sim, dm.id))
    await run.idle(dm_key(dm.id))
    assert uploads(discord_sim, dm.id) == [("load.csv", REPORT.encode(), "load")]
    (with_file,) = [m for m in discord_sim.bot_messages(dm) if m.raw["attachments"]]
    assert int(reply.id) < int(with_file.id)
    sends = [c for c in discord_sim.calls_to("create_message") if c.params.get("attachments")]
    assert len(sends) == 1 and sends[0].params["enforce_nonce"] is True


@pytest.fixture
def home(tmp_path: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[discord]
token = "{discord_sim.token}"
api_base = "{discord_sim.api_base}"
gateway_url = "{discord_sim.gateway_url}"
allowed_users = ["{ALICE.id}"]
""")  # fmt: skip
    return tmp_path


def a_file_upload(params: Json) -> bool:
    return bool(params.get("attachments"))


def file_sends(sim: DiscordSim, at_least: int) -> list[Call] | None:
    """The file uploads made, once there are ``at_least`` of them."""
    made = [c for c in sim.calls_to("create_message") if a_file_upload(c.params)]
    return made if len(made) >= at_least else None


async def test_killed_after_the_upload_the_file_shows_once_after_the_restart(
    home: Path, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    send_the_report(model_server)
    dm = discord_sim.dm_channel(ALICE)
    hold = discord_sim.hold_next("create_message", a_file_upload)
    await kill_in_flight(home, hold, lambda: discord_sim.user_says(dm, "the load report?"))
    assert len(uploads(discord_sim, dm.id)) == 1  # Discord has it; the killed run never heard

    async with restarted(home):
        await settled(home, "discord")
        sends = await discord_sim.wait_for(lambda: file_sends(discord_sim, at_least=2), TIMEOUT)
    assert sends[0].params["nonce"] == sends[1].params["nonce"]  # sent again, same nonce ...
    assert uploads(discord_sim, dm.id) == [("load.csv", REPORT.encode(), "load")]  # ... once
    assert [m.text for m in discord_sim.bot_messages(dm)].count(ANSWER) == 1
    assert len(model_server.requests) == 3  # the turn was not run again
