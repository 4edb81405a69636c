"""End to end on Slack: files shared with the bot reach the model through the real
slack-bolt (Socket Mode), the simulator's authenticated ``url_private_download``, the
gateway's intake and the scripted model server; the agent's ``send_file`` arrives once by
the v2 external upload, also across a kill -9 of ``commonos run`` after the upload
(docs/attachments.md, adapters/slack/files.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.platform_sim.slack_files import SimFile
from tests.platform_sim.slack_sim import ALICE, SlackSim, SlackUser
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import SlackGateway
from tests.support.killed_run import kill_in_flight, restarted, settled, write_config
from tests.support.model_replies import reply_tool_call
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.transcription_server import ScriptedTranscriptionServer, transcript

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
MALLORY = SlackUser("U0000MALLORY", "mallory")


def dm_key(sim: SlackSim) -> str:
    return f"slack:dm:{sim.dm_channel(ALICE)}"


async def start(factory: GatewayFactory, ws: Path, **options: Any) -> SlackGateway:
    profile = {"workspace": str(ws), "workspace_scope": "profile", **options.pop("profile", {})}
    return await factory("socket", profile=profile, **options)


async def share(sim: SlackSim, files: list[SimFile], text: str = "") -> str:
    dm = sim.dm_channel(ALICE)
    await sim.user_shares(dm, files, text)
    return dm


def user_content(models: ScriptedModelServer, index: int = 0) -> Any:
    return models.requests[index].messages[-1]["content"]


def as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def inbox(ws: Path) -> list[Path]:
    folder = ws / "inbox"
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )


# in --------------------------------------------------------------------------------------------
async def test_an_image_with_a_caption_is_an_image_part_for_a_vision_profile(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("A test pattern."))
    ws = tmp_path / "ws"
    run = await start(slack_gateway, ws, profile={"vision": True})
    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    dm = await share(slack_sim, [shot], "what is this?")
    await slack_sim.wait_for_bot_message(dm, lambda m: "test pattern" in m.text)
    await run.idle(dm_key(slack_sim))
    content = user_content(model_server)
    assert isinstance(content, list) and "what is this?" in as_text(content)
    assert any(p.get("type") == "image_url" for p in content)
    (saved,) = inbox(ws)
    assert saved.read_bytes() == PNG and slack_sim.downloads[shot.id] == 1


async def test_an_image_is_a_note_with_its_path_without_vision_and_a_text_file_is_inlined(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("Noted."))
    ws = tmp_path / "ws"
    run = await start(slack_gateway, ws)
    files = [
        slack_sim.add_file("shot.png", PNG, "image/png"),
        slack_sim.add_file("spec.pdf", b"%PDF-1.7\n", "application/pdf"),
        slack_sim.add_file("app.log", b"ERROR disk full\n", "text/plain"),
    ]
    dm = await share(slack_sim, files)  # no text: the files are the message
    await slack_sim.wait_for_bot_message(dm, lambda m: "Noted" in m.text)
    await run.idle(dm_key(slack_sim))
    content = user_content(model_server)
    text = as_text(content)
    assert "image_url" not in str(content)
    assert "inbox/shot.png" in text and "inbox/spec.pdf" in text
    assert "ERROR disk full" in text
    assert [p.name for p in inbox(ws)] == ["app.log", "shot.png", "spec.pdf"]


async def test_a_slack_audio_clip_is_transcribed_once_and_is_the_user_message(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("Restarting it now."))
    async with ScriptedTranscriptionServer() as speech:
        speech.script(transcript("please restart the web server"))
        sections = {"transcription": {"base_url": speech.url}}
        run = await start(slack_gateway, tmp_path / "ws", sections=sections)
        dm = await share(slack_sim, [slack_sim.audio_clip(b"\x1aE\xdf\xa3 webm clip")])
        await slack_sim.wait_for_bot_message(dm, lambda m: "Restarting" in m.text)
        await run.idle(dm_key(slack_sim))
        assert len(await speech.wait_for_uploads(1)) == 1
    echoes = [m.text for m in slack_sim.bot_messages(dm) if "🎤" in m.text]
    assert echoes == ["🎤 please restart the web server"]
    assert "please restart the web server" in as_text(user_content(model_server))
    assert len(model_server.requests) == 1


async def test_a_failed_download_gets_one_reply_naming_the_scope_and_the_rest_runs(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(reply_text("Answered the text."))
    ws = tmp_path / "ws"
    run = await start(slack_gateway, ws)
    slack_sim.scopes.discard("files:read")  # the app was installed without files:read
    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    dm = await share(slack_sim, [shot], "and what is 6 x 7?")
    await slack_sim.wait_for_bot_message(dm, lambda m: "Answered" in m.text)
    await run.idle(dm_key(slack_sim))
    refusals = [m.text for m in slack_sim.bot_messages(dm) if "shot.png" in m.text]
    assert len(refusals) == 1 and "files:read" in refusals[0]
    assert "what is 6 x 7?" in as_text(user_content(model_server))
    assert inbox(ws) == [] and slack_sim.downloads[shot.id] == 0


async def test_a_strangers_file_is_never_downloaded(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    run = await start(slack_gateway, tmp_path / "ws")
    slack_sim.users[MALLORY.id] = MALLORY
    evil = slack_sim.add_file("x.sh", b"rm -rf /", "text/x-sh", user=MALLORY.id)
    said = await slack_sim.user_shares(slack_sim.dm_channel(MALLORY), [evil], user=MALLORY)
    await slack_sim.wait_for(lambda: not slack_sim.unacked())
    await run.adapter.drain()
    assert said.event_id is not None
    assert slack_sim.calls_to("files.download") == [] and slack_sim.downloads[evil.id] == 0
    assert model_server.requests == []


# out -------------------------------------------------------------------------------------------
async def test_send_file_is_shared_once_in_the_thread_after_the_reply(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "report.csv").write_text("a,b\n1,2\n")
    model_server.script(
        reply_tool_call("send_file", {"path": "report.csv", "caption": "the numbers"}),
        reply_text("Here is the report."),
    )
    run = await start(slack_gateway, ws)
    asked = await slack_sim.user_says("C0000GEN", f"{slack_sim.mention} the report please")
    shared = await slack_sim.wait_for_bot_message("C0000GEN", lambda m: bool(m.raw.get("files")))
    await run.idle(f"slack:thread:C0000GEN:{asked.id}")
    assert (shared.thread, shared.text) == (asked.id, "the numbers")
    assert [f["name"] for f in shared.raw["files"]] == ["report.csv"]
    assert slack_sim.files.uploaded[0].content == b"a,b\n1,2\n"
    assert len(slack_sim.calls_to("files.completeUploadExternal")) == 1
    thread = [m for m in slack_sim.bot_messages("C0000GEN") if m.thread == asked.id]
    texts = [m.text for m in thread]
    assert texts.index("Here is the report.") < texts.index("the numbers")  # reply, then file


# across a kill -9 ------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path: Path, slack_sim: SlackSim, model_server: ScriptedModelServer) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "report.csv").write_text("a,b\n1,2\n")
    write_config(tmp_path, model_server, f"""
[profiles.default]
sandbox = "none"
workspace = "{ws}"
workspace_scope = "profile"

[slack]
bot_token = "{slack_sim.bot_token}"
app_token = "{slack_sim.app_token}"
api_base_url = "{slack_sim.api_url}"
allowed_users = ["{ALICE.id}"]
""")  # fmt: skip
    return tmp_path


async def test_killed_after_the_upload_the_file_is_shown_once_after_the_restart(
    home: Path, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("send_file", {"path": "report.csv"}), reply_text("Here it is.")
    )
    dm = slack_sim.dm_channel(ALICE)
    hold = slack_sim.hold_next("files.completeUploadExternal")
    await kill_in_flight(home, hold, lambda: slack_sim.user_says(dm, "send the report"))
    assert len(slack_sim.files.uploaded) == 1  # Slack shared it; the gateway never heard

    async with restarted(home):
        await settled(home, "slack")
        await slack_sim.wait_for(lambda: slack_sim.calls_to("conversations.history"), 10)
    assert len(slack_sim.calls_to("files.completeUploadExternal")) == 1
    shares = [m for m in slack_sim.bot_messages(dm) if m.raw.get("files")]
    assert len(shares) == 1 and len(model_server.requests) == 2  # the tool call, the answer
