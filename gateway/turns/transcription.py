"""Voice notes and audio files to text, through any OpenAI-compatible transcription endpoint.

The intake (gateway/turns/intake.py) hands a saved voice note or audio file to
:meth:`Transcriber.transcribe`, which sends it to ``POST <base_url>/audio/transcriptions``
(``[transcription]``: OpenAI ``https://api.openai.com/v1``, Groq
``https://api.groq.com/openai/v1``, a local faster-whisper-server/speaches
``http://127.0.0.1:8000/v1``, or whisper.cpp's ``whisper-server --inference-path
/v1/audio/transcriptions``) as ``multipart/form-data``: ``file`` (streamed from disk in
64 KiB pieces by httpx's multipart encoder, never read whole into memory), ``model``,
``response_format=json`` and ``language`` when configured; ``Authorization: Bearer`` when
an ``api_key`` is set. The answer's ``text``, stripped, is the transcript
(docs/attachments.md, "Voice and audio").

Whatever goes wrong becomes one :class:`TranscriptionFailed` whose ``reason`` a user can
read and act on; it never holds the API key (nor the masked form OpenAI echoes back)::

    HTTP 401 / 403            the server refused the API key          not retried
    HTTP 404                  wrong base_url or model                 not retried
    HTTP 413                  file too large for the server           not retried
    HTTP 400 / 415 / 422      the server cannot read the file         not retried
    HTTP 429                  rate limited: retry later               retried once
    HTTP 429 insufficient_quota  the account is out of credit         not retried
    HTTP 5xx                  the server failed                       retried once
    connect error / dropped   could not reach the server              retried once
    timeout                   no answer within ``timeout`` seconds    not retried
    200 not JSON, no text     unreadable answer                       not retried
    200 {"error": ...}        whisper.cpp's failure (it answers 200)  not retried
    200 empty text            "the transcript was empty"              not retried

A retried failure waits ``Retry-After`` (when the server sends one, up to
:data:`MAX_RETRY_WAIT`) or :data:`RETRY_DELAY` on the injected ``sleep``, then tries once
more; a server asking for a longer wait is not retried (the reason says to retry later).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import IO, Any

import httpx

from core.model.classify import header_retry_after, quote
from core.text import valid_text

Sleep = Callable[[float], Awaitable[None]]

RETRY_DELAY = 2.0
"""Seconds before the one retry when the server does not say how long to wait."""
MAX_RETRY_WAIT = 20.0
"""A server asking to wait longer than this (Retry-After) is not retried now."""
ATTEMPTS = 2

_ACCEPTED_SUFFIXES = frozenset(
    # File types both OpenAI and Groq accept (their 400 bodies list them; see
    # tests/support/transcription_wire.py). They choose the decoder from the name's suffix.
    {".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".ogg", ".wav", ".webm"}
)
_SUFFIX_FOR = {
    ".oga": ".ogg",  # Ogg audio: OpenAI takes .oga, Groq only .ogg
    ".opus": ".ogg",  # Opus in Ogg (Telegram voice notes): Groq takes .opus, OpenAI not
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/m4a": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/webm": ".webm",
    "video/webm": ".webm",
    "audio/flac": ".flac",
    "audio/x-flac": ".flac",
    "video/mp4": ".mp4",
}
_MASKED_KEY = re.compile(r"[\w\-]*\*{3,}[\w\-]*")  # OpenAI: "sk-0oJ1K****...cMnE"


@dataclass(frozen=True, slots=True)
class TranscriptionConfig:
    """``[transcription]`` (docs/attachments.md): where and how voice is transcribed."""

    base_url: str
    model: str = "whisper-1"
    api_key: str = ""
    timeout: float = 60.0
    language: str | None = None

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/audio/transcriptions"


class TranscriptionFailed(Exception):
    """A voice note or audio file could not be transcribed; ``reason`` says why, in words
    for the user (never the API key). ``retryable`` marks the failures worth one retry."""

    def __init__(self, reason: str, *, retryable: bool = False, wait: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.wait = wait
        """Seconds the server asked to wait before a retry (Retry-After), if it said."""


class Transcriber:
    """Sends audio to ``config.endpoint``; see the module docstring."""

    def __init__(
        self,
        config: TranscriptionConfig,
        client: httpx.AsyncClient | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        retry_delay: float = RETRY_DELAY,
    ) -> None:
        self.config = config
        self._client = client or httpx.AsyncClient()
        self._owns_client = client is None
        self._sleep = sleep
        self._retry_delay = retry_delay

    async def transcribe(self, path: Path, name: str, mime: str) -> str:
        """The stripped transcript of the audio file at ``path`` (sent as ``name``)."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._attempt(path, name, mime)
            except TranscriptionFailed as failure:
                if not failure.retryable or attempt == ATTEMPTS:
                    raise
                await self._sleep(self._retry_delay if failure.wait is None else failure.wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    # one request ----------------------------------------------------------------------

    async def _attempt(self, path: Path, name: str, mime: str) -> str:
        audio = await _open(path)
        try:
            response = await self._post(audio, upload_name(name, mime), mime)
        finally:
            audio.close()
        return self._transcript(response)

    async def _post(self, audio: IO[bytes], name: str, mime: str) -> httpx.Response:
        try:
            return await self._client.post(
                self.config.endpoint,
                data=self._fields(),
                files={"file": (name, audio, mime or "application/octet-stream")},
                headers=self._headers(),
                timeout=self.config.timeout,
            )
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise self._transport_failure(error) from None

    def _fields(self) -> dict[str, str]:
        fields = {"model": self.config.model, "response_format": "json"}
        if self.config.language:
            fields["language"] = self.config.language
        return fields

    def _headers(self) -> dict[str, str]:
        if not self.config.api_key:
            return {}
        return {"Authorization": f"Bearer {self.config.api_key}"}

    # reading the answer -------------------------------------------------------------------

    def _transcript(self, response: httpx.Response) -> str:
        if response.status_code >= 400:
            raise self._status_failure(response)
        try:
            body: Any = response.json()
        except ValueError:
            raise TranscriptionFailed(
                "the transcription server's answer is not JSON: "
                + self._scrub(quote(response.text) or "(empty body)")
            ) from None
        return self._text_of(body)

    def _text_of(self, body: Any) -> str:
        if not isinstance(body, dict):
            raise TranscriptionFailed("the transcription server's answer has no text")
        text = body.get("text")
        if not isinstance(text, str):
            problem = _problem(body)
            if problem:  # whisper.cpp answers HTTP 200 {"error": "failed to read WAV file"}
                reason = f"the transcription server could not transcribe it: {problem}"
                raise TranscriptionFailed(self._scrub(reason))
            raise TranscriptionFailed("the transcription server's answer has no text")
        if not text.strip():
            raise TranscriptionFailed("the transcript was empty")
        return valid_text(text.strip())  # the server's answer is an edge (core.text)

    def _status_failure(self, response: httpx.Response) -> TranscriptionFailed:
        status = response.status_code
        detail = self._scrub(_detail(response))
        said = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
        if status in (401, 403):  # OpenAI echoes a masked key: say nothing of the body
            return TranscriptionFailed(
                f"the transcription server refused the API key (HTTP {status}): "
                "check api_key in [transcription]"
            )
        if status == 404:
            return TranscriptionFailed(
                f"the transcription server at {self._where()} has no model "
                f"{self.config.model!r} or no /audio/transcriptions endpoint ({said}): "
                "check base_url and model in [transcription]"
            )
        if status == 413:
            return TranscriptionFailed(
                f"the file is too large for the transcription server ({said})"
            )
        if status in (400, 415, 422):
            return TranscriptionFailed(f"the transcription server cannot take this file ({said})")
        if status == 429:
            return self._rate_limited(response, said)
        if status >= 500:
            return TranscriptionFailed(
                f"the transcription server failed ({said}); retry later",
                retryable=True,
                wait=header_retry_after(response.headers),
            )
        return TranscriptionFailed(f"the transcription server answered {said}")

    def _rate_limited(self, response: httpx.Response, said: str) -> TranscriptionFailed:
        if "insufficient_quota" in response.text:  # out of credit: waiting will not help
            return TranscriptionFailed(
                f"the transcription account has no quota left ({said}): check its plan and billing"
            )
        wait = header_retry_after(response.headers)
        if wait is not None and wait > MAX_RETRY_WAIT:
            return TranscriptionFailed(
                f"the transcription server is rate limiting requests ({said}); "
                f"retry in {wait:.0f} s"
            )
        return TranscriptionFailed(
            f"the transcription server is rate limiting requests ({said}); retry later",
            retryable=True,
            wait=wait,
        )

    def _transport_failure(self, error: httpx.HTTPError | httpx.InvalidURL) -> TranscriptionFailed:
        where = self._where()
        if isinstance(error, httpx.ConnectTimeout):
            return TranscriptionFailed(
                f"could not connect to the transcription server at {where} (timed out)",
                retryable=True,
            )
        if isinstance(error, httpx.TimeoutException):
            return TranscriptionFailed(
                f"the transcription server at {where} did not answer within "
                f"{self.config.timeout:g} s"
            )
        if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return TranscriptionFailed(
                f"base_url in [transcription] is not an http(s) URL: {self.config.base_url!r}"
            )
        if isinstance(error, httpx.ConnectError):
            return TranscriptionFailed(
                f"could not connect to the transcription server at {where} "
                f"({self._scrub(str(error)) or 'connection refused'}): is it running, and is "
                "base_url in [transcription] right?",
                retryable=True,
            )
        return TranscriptionFailed(
            f"the connection to the transcription server at {where} broke ({type(error).__name__})",
            retryable=isinstance(error, httpx.TransportError),
        )

    # wording ------------------------------------------------------------------------------

    def _where(self) -> str:
        """The endpoint's host and path, without any credentials in the URL."""
        try:
            url = httpx.URL(self.config.base_url)
        except (httpx.InvalidURL, TypeError):
            return "the configured base_url"
        port = f":{url.port}" if url.port else ""
        return f"{url.host}{port}{url.path.rstrip('/')}"

    def _scrub(self, text: str) -> str:
        """``text`` without the API key, whole or masked."""
        if self.config.api_key:
            text = text.replace(self.config.api_key, "[api key]")
        return _MASKED_KEY.sub("[api key]", text)


def upload_name(name: str, mime: str) -> str:
    """The file name to send: the servers pick the decoder from its suffix, so a name they
    would refuse (``voice.oga`` at Groq, ``voice`` anywhere) gets the suffix of its type."""
    pure = PurePath(name or "audio")
    suffix = pure.suffix.lower()
    if suffix in _ACCEPTED_SUFFIXES:
        return pure.name
    better = _SUFFIX_FOR.get(suffix) or _SUFFIX_FOR.get(mime.split(";")[0].strip().lower())
    if better is None:
        return pure.name
    stem = pure.stem if suffix in _SUFFIX_FOR else pure.name
    return stem + better


async def _open(path: Path) -> IO[bytes]:
    try:
        return await asyncio.to_thread(path.open, "rb")
    except OSError as error:
        raise TranscriptionFailed(
            f"could not read the saved audio file ({error.strerror})"
        ) from None


def _detail(response: httpx.Response) -> str:
    """The server's own error message (OpenAI/Groq, whisper.cpp, FastAPI), else the body."""
    try:
        body: Any = response.json()
    except ValueError:
        return quote(response.text)
    problem = _problem(body) if isinstance(body, dict) else ""
    return problem or quote(json.dumps(body, ensure_ascii=False))


def _problem(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return quote(error["message"])  # OpenAI, Groq
    if isinstance(error, str):
        return quote(error)  # whisper.cpp
    detail = body.get("detail")
    if isinstance(detail, str):
        return quote(detail)  # FastAPI (faster-whisper-server / speaches)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return quote(str(detail[0].get("msg", "")))  # FastAPI validation error
    return ""
