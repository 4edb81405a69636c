"""gateway.turns.transcription against the scripted transcription server, over real HTTP (httpx).

Each error path gives one readable reason and never the API key; failures worth it are
retried once, on an injected sleep; the file goes up as multipart, streamed from disk.
"""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.turns.transcription import (
    RETRY_DELAY,
    Transcriber,
    TranscriptionConfig,
    TranscriptionFailed,
    upload_name,
)
from tests.support.backoff import TestSleep
from tests.support.transcription_server import (
    ScriptedTranscriptionServer,
    TranscriptionReply,
    drop,
    error,
    hang,
    json_reply,
    raw,
    transcript,
)
from tests.support.transcription_wire import (
    FASTER_WHISPER_FORBIDDEN,
    FASTER_WHISPER_MISSING_FILE,
    GROQ_BAD_FORMAT,
    GROQ_BAD_KEY,
    GROQ_NO_MODEL,
    GROQ_RATE_LIMITED,
    OPENAI_BAD_FORMAT,
    OPENAI_BAD_KEY,
    OPENAI_NO_QUOTA,
    OPENAI_TOO_LARGE,
    OPENAI_WRONG_ENDPOINT,
    WHISPER_CPP_BAD_AUDIO,
    WHISPER_CPP_NOT_FOUND,
    WHISPER_CPP_TEXT,
)

KEY = "sk-test-0oJ1KsecretsecretcMnE"
VOICE = b"OggS\x00\x02" + bytes(range(256)) * 8


@pytest.fixture
async def server() -> AsyncIterator[ScriptedTranscriptionServer]:
    async with ScriptedTranscriptionServer() as started:
        yield started


@pytest.fixture
def voice(tmp_path: Path) -> Path:
    path = tmp_path / "voice.ogg"
    path.write_bytes(VOICE)
    return path


@pytest.fixture
def sleep() -> TestSleep:
    return TestSleep()


def transcriber(
    server: ScriptedTranscriptionServer, sleep: TestSleep, **options: object
) -> Transcriber:
    settings: dict[str, object] = {"base_url": server.url, "api_key": KEY, **options}
    return Transcriber(TranscriptionConfig(**settings), sleep=sleep)  # type: ignore[arg-type]


async def failure_of(client: Transcriber, path: Path, name: str = "voice.ogg") -> str:
    try:
        with pytest.raises(TranscriptionFailed) as caught:
            await client.transcribe(path, name, "audio/ogg")
    finally:
        await client.aclose()
    reason = caught.value.reason
    assert KEY not in reason and KEY not in str(caught.value)
    assert "0oJ1K" not in reason and "cMnE" not in reason  # nor a masked form of it
    return reason


# success and the request's shape ---------------------------------------------------------


async def test_the_transcript_is_the_answers_text_stripped(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(json_reply(WHISPER_CPP_TEXT))  # whisper.cpp: leading space, trailing \n
    client = transcriber(server, sleep)
    text = await client.transcribe(voice, "voice.ogg", "audio/ogg")
    await client.aclose()
    assert text == "And so my fellow Americans, ask not what your country can do for you."


async def test_the_request_is_one_multipart_upload_of_file_model_and_format(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(transcript("turn the lights off"))
    client = transcriber(server, sleep, model="whisper-large-v3")
    assert await client.transcribe(voice, "voice.ogg", "audio/ogg") == "turn the lights off"
    await client.aclose()
    [upload] = await server.wait_for_uploads(1)
    assert upload.path == "/v1/audio/transcriptions"
    assert upload.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert upload.fields == {"model": "whisper-large-v3", "response_format": "json"}
    assert (upload.file_name, upload.file_type) == ("voice.ogg", "audio/ogg")
    assert upload.file_bytes == VOICE
    assert upload.authorization == f"Bearer {KEY}"
    assert len(server.uploads) == 1 and sleep.waits == []


async def test_the_language_is_sent_when_configured_and_no_key_sends_no_authorization(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(transcript("bonjour"))
    client = transcriber(server, sleep, api_key="", language="fr")
    await client.transcribe(voice, "voice.ogg", "audio/ogg")
    await client.aclose()
    [upload] = await server.wait_for_uploads(1)
    assert upload.fields["language"] == "fr"
    assert upload.model == "whisper-1"  # the default
    assert "Authorization" not in upload.headers


async def test_a_name_the_servers_refuse_is_sent_with_the_suffix_of_its_type(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(transcript("hi"))
    client = transcriber(server, sleep)
    await client.transcribe(voice, "voice.oga", "audio/ogg")  # Groq refuses .oga
    await client.aclose()
    [upload] = await server.wait_for_uploads(1)
    assert upload.file_name == "voice.ogg"


def test_upload_names() -> None:
    assert upload_name("memo.m4a", "audio/mp4") == "memo.m4a"
    assert upload_name("voice.oga", "audio/ogg") == "voice.ogg"
    assert upload_name("note.opus", "audio/opus") == "note.ogg"
    assert upload_name("voice", "audio/ogg") == "voice.ogg"
    assert upload_name("", "audio/mpeg") == "audio.mp3"
    assert upload_name("Voice.WAV", "audio/wav") == "Voice.WAV"
    assert upload_name("thing", "application/octet-stream") == "thing"


# each error path: one readable reason, no key, no retry ---------------------------------

NOT_RETRIED: list[tuple[str, TranscriptionReply, str]] = [
    ("openai-401", error(401, OPENAI_BAD_KEY), "refused the API key (HTTP 401)"),
    ("groq-401", error(401, GROQ_BAD_KEY), "check api_key in [transcription]"),
    ("faster-whisper-403", error(403, FASTER_WHISPER_FORBIDDEN), "refused the API key (HTTP 403)"),
    (
        "openai-404",
        error(404, OPENAI_WRONG_ENDPOINT),
        "no model 'whisper-1' or no /audio/transcriptions endpoint",
    ),
    ("groq-404", error(404, GROQ_NO_MODEL), "check base_url and model in [transcription]"),
    ("whisper-cpp-404", raw(WHISPER_CPP_NOT_FOUND, status=404, content_type="text/plain"), "404"),
    ("openai-413", error(413, OPENAI_TOO_LARGE), "too large for the transcription server"),
    ("openai-400", error(400, OPENAI_BAD_FORMAT), "cannot take this file (HTTP 400: Invalid file"),
    ("groq-400", error(400, GROQ_BAD_FORMAT), "file must be one of the following types"),
    ("415", raw("Unsupported Media Type", status=415, content_type="text/plain"), "HTTP 415"),
    ("faster-whisper-422", error(422, FASTER_WHISPER_MISSING_FILE), "Field required"),
    ("openai-no-quota", error(429, OPENAI_NO_QUOTA), "no quota left"),
    ("html", raw("<html>Bad Gateway</html>"), "answer is not JSON: <html>Bad Gateway</html>"),
    ("no-text", json_reply({"segments": []}), "answer has no text"),
    ("whisper-cpp-200-error", json_reply(WHISPER_CPP_BAD_AUDIO), "failed to read WAV file"),
    ("empty", transcript(" \n "), "the transcript was empty"),
]


@pytest.mark.parametrize(
    ("reply", "expected"), [case[1:] for case in NOT_RETRIED], ids=[c[0] for c in NOT_RETRIED]
)
async def test_each_failure_has_a_readable_reason_without_the_key(
    server: ScriptedTranscriptionServer,
    voice: Path,
    sleep: TestSleep,
    reply: TranscriptionReply,
    expected: str,
) -> None:
    server.script(reply)
    reason = await failure_of(transcriber(server, sleep), voice)
    assert expected in reason
    assert len(server.uploads) == 1 and sleep.waits == []


async def test_a_server_that_echoes_the_key_gets_it_scrubbed(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(error(400, {"error": {"message": f"bad request with key {KEY}"}}))
    reason = await failure_of(transcriber(server, sleep), voice)
    assert "bad request with key [api key]" in reason


async def test_no_answer_within_the_timeout_is_a_timeout_not_retried(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(hang())
    reason = await failure_of(transcriber(server, sleep, timeout=0.3), voice)
    assert reason.endswith("did not answer within 0.3 s")
    assert len(server.uploads) == 1 and sleep.waits == []


async def test_a_base_url_that_is_not_http_is_named(voice: Path, sleep: TestSleep) -> None:
    config = TranscriptionConfig(base_url="ftp://example.org/v1", api_key=KEY)
    reason = await failure_of(Transcriber(config, sleep=sleep), voice)
    assert reason == "base_url in [transcription] is not an http(s) URL: 'ftp://example.org/v1'"


async def test_a_missing_audio_file_is_named(
    server: ScriptedTranscriptionServer, tmp_path: Path, sleep: TestSleep
) -> None:
    reason = await failure_of(transcriber(server, sleep), tmp_path / "gone.ogg")
    assert reason == "could not read the saved audio file (No such file or directory)"
    assert server.uploads == []


# one bounded retry, on the injected sleep -------------------------------------------------


async def test_rate_limited_is_retried_once_after_retry_after(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(error(429, GROQ_RATE_LIMITED, headers={"Retry-After": "3"}), transcript("ok"))
    client = transcriber(server, sleep)
    assert await client.transcribe(voice, "voice.ogg", "audio/ogg") == "ok"
    await client.aclose()
    assert sleep.waits == [3.0]
    assert len(server.uploads) == 2
    assert server.uploads[1].file_bytes == VOICE  # the file is sent again, whole


async def test_rate_limited_twice_says_retry_later(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(error(429, GROQ_RATE_LIMITED), error(429, GROQ_RATE_LIMITED))
    reason = await failure_of(transcriber(server, sleep), voice)
    assert "is rate limiting requests (HTTP 429: Rate limit reached" in reason
    assert reason.endswith("; retry later")
    assert sleep.waits == [RETRY_DELAY] and len(server.uploads) == 2


async def test_a_long_retry_after_is_not_waited_for(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(error(429, GROQ_RATE_LIMITED, headers={"Retry-After": "120"}))
    reason = await failure_of(transcriber(server, sleep), voice)
    assert reason.endswith("retry in 120 s")
    assert sleep.waits == [] and len(server.uploads) == 1


async def test_server_errors_are_retried_once_then_reported(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    failed = error(503, {"error": {"message": "Service Unavailable", "type": "server_error"}})
    server.script(failed, failed, transcript("never reached"))
    reason = await failure_of(transcriber(server, sleep), voice)
    assert reason == (
        "the transcription server failed (HTTP 503: Service Unavailable); retry later"
    )
    assert sleep.waits == [RETRY_DELAY] and len(server.uploads) == 2


async def test_a_dropped_connection_is_retried_once(
    server: ScriptedTranscriptionServer, voice: Path, sleep: TestSleep
) -> None:
    server.script(drop(), transcript("second time lucky"))
    client = transcriber(server, sleep)
    assert await client.transcribe(voice, "voice.ogg", "audio/ogg") == "second time lucky"
    await client.aclose()
    assert sleep.waits == [RETRY_DELAY] and len(server.uploads) == 2


async def test_connection_refused_is_retried_once_then_named(voice: Path, sleep: TestSleep) -> None:
    async with ScriptedTranscriptionServer() as gone:
        url = gone.url
    config = TranscriptionConfig(base_url=url, api_key=KEY)
    reason = await failure_of(Transcriber(config, sleep=sleep), voice)
    port = httpx.URL(url).port
    assert reason.startswith(
        f"could not connect to the transcription server at 127.0.0.1:{port}/v1"
    )
    assert reason.endswith("is it running, and is base_url in [transcription] right?")
    assert sleep.waits == [RETRY_DELAY]


# streaming and lifecycle --------------------------------------------------------------------


async def test_a_large_file_is_streamed_not_held_in_memory(
    tmp_path: Path, voice: Path, sleep: TestSleep
) -> None:
    size = 4 << 20
    big = tmp_path / "long.mp3"
    big.write_bytes(os.urandom(size))
    async with ScriptedTranscriptionServer(keep_bytes=0) as server:
        server.script(transcript("warm"), transcript("a long talk"))
        client = transcriber(server, sleep)
        await client.transcribe(voice, "voice.ogg", "audio/ogg")  # imports, connection
        tracemalloc.start()
        try:
            text = await client.transcribe(big, "long.mp3", "audio/mpeg")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await client.aclose()
    assert text == "a long talk"
    upload = server.uploads[1]
    assert upload.file_size == size
    assert upload.file_sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert upload.file_chunks > 1
    assert peak < size // 4, f"peak traced memory {peak} bytes for a {size}-byte file"


async def test_aclose_closes_only_its_own_client(
    server: ScriptedTranscriptionServer, sleep: TestSleep
) -> None:
    own = Transcriber(TranscriptionConfig(base_url=server.url))
    await own.aclose()
    async with httpx.AsyncClient() as shared:
        lent = Transcriber(TranscriptionConfig(base_url=server.url), shared)
        await lent.aclose()
        assert not shared.is_closed
