"""Voice notes through the intake (docs/attachments.md, "Voice and audio"): the real
Transcriber over HTTP against the scripted transcription server; the transcript is the
message text, shown back once; without ``[transcription]`` one reply says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.attachments import Attachment
from gateway.turns.intake import Attachments
from gateway.turns.transcription import Transcriber, TranscriptionConfig
from tests.gateway.fakes import Step, event
from tests.gateway.harness import ALICE, Gateway, GatewayFactory
from tests.gateway.test_intake import inbox, last_user_text, profile
from tests.support.transcription_server import ScriptedTranscriptionServer, error, transcript
from tests.support.transcription_wire import OPENAI_BAD_KEY

OGG = b"OggS" + b"\x00" * 200


@pytest.fixture
async def whisper() -> AsyncIterator[ScriptedTranscriptionServer]:
    async with ScriptedTranscriptionServer() as server:
        yield server


def heard_by(server: ScriptedTranscriptionServer) -> Attachments:
    return Attachments(transcriber=Transcriber(TranscriptionConfig(base_url=server.url)))


def voice(gw: Gateway) -> Attachment:
    offered = gw.adapter.serve("voice-1", OGG)
    return replace(offered, kind="voice", name="voice.oga", mime="audio/ogg")


async def test_a_voice_note_is_transcribed_once_and_its_transcript_is_the_message(
    running: GatewayFactory, tmp_path: Path, whisper: ScriptedTranscriptionServer
) -> None:
    whisper.script(transcript("turn the lights off"))
    async with running(
        Step("done"), profile=profile(tmp_path), attachments=heard_by(whisper)
    ) as gw:
        inbound = event(ALICE, "", attachments=(voice(gw),))
        await gw.service.inbound(inbound)
        await gw.idle()
        await gw.service.inbound(inbound)  # replayed: no second upload, no second echo
        await gw.idle()

        (upload,) = whisper.uploads
        assert upload.file_size == len(OGG)
        assert gw.adapter.texts() == ["🎤 turn the lights off", "done"]
        assert last_user_text(gw).startswith("turn the lights off")
        assert inbox(gw) == ["voice.oga"]


async def test_a_spoken_stop_is_a_message_not_a_command(
    running: GatewayFactory, tmp_path: Path, whisper: ScriptedTranscriptionServer
) -> None:
    whisper.script(transcript("/stop"))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=heard_by(whisper)) as gw:
        await gw.service.inbound(event(ALICE, "", attachments=(voice(gw),)))
        await gw.idle()

        assert len(gw.model.requests) == 1
        assert last_user_text(gw).startswith("/stop")
        assert gw.adapter.texts() == ["🎤 /stop", "ok"]


async def test_the_caption_follows_the_transcript(
    running: GatewayFactory, tmp_path: Path, whisper: ScriptedTranscriptionServer
) -> None:
    whisper.script(transcript("what does it say"))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=heard_by(whisper)) as gw:
        await gw.service.inbound(event(ALICE, "(from the car)", attachments=(voice(gw),)))
        await gw.idle()

        assert last_user_text(gw).startswith("what does it say\n\n(from the car)")


async def test_without_transcription_a_voice_note_gets_one_reply_and_no_turn(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("never"), profile=profile(tmp_path)) as gw:
        await gw.service.inbound(event(ALICE, "", attachments=(voice(gw),)))
        await gw.idle()

        (reply,) = gw.adapter.texts()
        assert reply.startswith("⚠️ voice.oga: voice messages cannot be understood here")
        assert "[transcription]" in reply
        assert gw.adapter.downloads == []
        assert gw.model.requests == []


async def test_a_failed_transcription_is_told_and_the_caption_still_runs(
    running: GatewayFactory, tmp_path: Path, whisper: ScriptedTranscriptionServer
) -> None:
    whisper.script(error(401, OPENAI_BAD_KEY))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=heard_by(whisper)) as gw:
        await gw.service.inbound(event(ALICE, "see this", attachments=(voice(gw),)))
        await gw.idle()

        refusal, reply = gw.adapter.texts()
        assert refusal.startswith("⚠️ voice.oga could not be transcribed: the transcription")
        assert "API key" in refusal
        assert reply == "ok"
        assert "see this" in last_user_text(gw)
