"""The intake: the files of an admitted message, taken in just before its turn.

It runs in the dispatcher's lane of the session (``ChatTurns.run_turn``, the Dispatcher's
run port), so a session's messages keep their order, and only for a sender the router admitted — a
stranger's files are never downloaded. For each offered attachment, in order
(docs/attachments.md, "Inbound"):

1. a row of the same update and place (``origin``, ``index``) already ``saved``, whose file
   is still in the workspace with its size, is reused: a replayed update downloads nothing
   again (nor transcribes); one ``failed`` was answered the first time and is skipped;
2. a kind not in ``[attachments] kinds``, a declared size over ``max_bytes``, or a voice
   note without ``[transcription]`` → one reply, nothing downloaded;
3. else the row is written ``downloading`` and :meth:`Adapter.download` is streamed into
   ``inbox/.partial-<id>`` of the session's workspace, counting bytes (past ``max_bytes``
   it stops: the partial is deleted and the reply names the limit) and hashing them; the
   file is published under its safe unique name (:mod:`gateway.turns.workspace_files`) and the row
   written ``saved`` with path, size and sha256; a download still running past its
   :class:`~gateway.turns.workspace_files.DownloadDeadline` is given up with one reply;
4. a voice note or audio file is transcribed (``[transcription]``,
   :mod:`gateway.turns.transcription`); the transcript is kept on the row, shown back once in the
   chat (``🎤 …``) and becomes the message's text, the caption after it.

Every failure gets one plain reply naming the file and the limit or the reason, and the
rest of the message still runs. A message left with nothing (no text, no file the model
can use) runs no turn: :meth:`Intake.take_in` returns None.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from adapters.base import Adapter, DownloadFailed
from core.agent.turn import TurnResult, UserMessage
from core.attachments import ATTACHMENT_KINDS, SPOKEN, Attachment, AttachmentKind
from core.store.base import AttachmentRecord, AttachmentState, Store, StoreError
from core.tools.beneath import BadPath
from core.tools.limits import megabytes
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import Place
from gateway.turns.transcription import TranscriptionFailed
from gateway.turns.workspace_files import (
    INBOX,
    DownloadDeadline,
    Inbox,
    partial_name,
    safe_name,
    write_all,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
KIND_WORDS: dict[AttachmentKind, str] = {
    "image": "images",
    "document": "documents",
    "audio": "audio files",
    "voice": "voice messages",
    "video": "videos",
}
NEEDS_TRANSCRIPTION = (
    "⚠️ {name}: voice messages cannot be understood here yet: the gateway needs a "
    "[transcription] section in its config.toml (an OpenAI-compatible transcription "
    "endpoint; see docs/attachments.md). Please type your message instead."
)


class Transcribes(Protocol):
    """:class:`gateway.turns.transcription.Transcriber`, as the intake uses it."""

    async def transcribe(self, path: Path, name: str, mime: str) -> str: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class IntakeLimits:
    """``[attachments]``: the largest file and the kinds taken in."""

    max_bytes: int = DEFAULT_MAX_BYTES
    kinds: frozenset[AttachmentKind] = frozenset(ATTACHMENT_KINDS)
    deadline: DownloadDeadline = field(default_factory=DownloadDeadline)


@dataclass(frozen=True, slots=True)
class Attachments:
    """What users may send (``[attachments]``) and who transcribes voice
    (``[transcription]``; None: a voice note gets a reply saying it needs one)."""

    limits: IntakeLimits = field(default_factory=IntakeLimits)
    transcriber: Transcribes | None = None
    outbox: Path | None = None
    """Where files the agent sends wait (``<data dir>/outbox``; None: a temporary
    directory), :class:`gateway.turns.files.Spool`."""


DEFAULT_ATTACHMENTS = Attachments()

NOTHING_TO_RUN = TurnResult(
    turn_id="", session_id="", status="completed", exit_reason="text_response", reply=None,
    iterations=0,
)  # fmt: skip
"""The result of a message left with nothing to run (its files refused, no text): no
model call, no reply — each file's refusal was one."""


class Refused(Exception):
    """One file not taken in; ``reply`` is what the chat reads."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.reply = reply


@dataclass(frozen=True, slots=True)
class _Message:
    """What every file of one message shares."""

    session_key: str
    origin: str
    adapter: Adapter
    place: Place
    workspace: Path


class Intake:
    def __init__(self, store: Store, delivery: Delivery, given: Attachments) -> None:
        self._store, self._delivery = store, delivery
        self.limits = given.limits
        self._transcriber = given.transcriber

    async def aclose(self) -> None:
        """Close the transcriber (the intake owns it)."""
        if self._transcriber is not None:
            await self._transcriber.aclose()

    async def take_in(
        self, session_key: str, message: UserMessage, place: Place | None, workspace: Path
    ) -> UserMessage | None:
        """``message`` with its files saved (and voice transcribed), or None when nothing
        is left to run (see the module docstring)."""
        if not message.attachments:
            return message
        if place is None:
            logger.error(
                "%s: files of %s dropped: no chat to reply in", session_key, message.origin
            )
            return _left(message, ())
        origin = message.origin or f"{session_key}:{id(message)}"
        job = _Message(session_key, origin, place.outbound.adapter, place, workspace)
        rows = await self._rows(message.origin)
        saved = []
        for index, offered in enumerate(message.attachments):
            taken = await self._one(job, index, offered, rows.get(index))
            if taken is not None:
                saved.append(taken)
        return _left(message, saved)

    async def _rows(self, origin: str | None) -> dict[int, AttachmentRecord]:
        if origin is None:
            return {}
        try:
            return {row.index: row for row in await self._store.attachments_of(origin)}
        except StoreError as exc:
            logger.error("attachments of %s not read (%s): taken in again", origin, exc)
            return {}

    async def _one(
        self, job: _Message, index: int, offered: Attachment, row: AttachmentRecord | None
    ) -> Attachment | None:
        offered = replace(offered, name=safe_name(offered.name, offered.mime))
        if row is not None and row.state == "failed":
            return None  # answered when it failed
        if row is not None and row.state == "saved" and _still_there(job, row.attachment):
            return row.attachment
        try:
            self._check(offered)
            saved = await self._save(job, index, offered)
            return await self._transcribed(job, index, saved)
        except Refused as refusal:
            await self._record(job, index, offered, "failed", refusal.reply)
            await self._say(job, refusal.reply)
            return None

    def _check(self, offered: Attachment) -> None:
        """Refuse before any download: the kind, the declared size, voice unheard."""
        name, limit = offered.name, self.limits.max_bytes
        if offered.kind not in self.limits.kinds:
            words = KIND_WORDS[offered.kind]
            raise Refused(f"⚠️ {name} was not taken in: {words} are not accepted here.")
        if offered.size > limit:
            raise Refused(_over_limit(name, limit, offered.size))
        if offered.kind in SPOKEN and self._transcriber is None:
            raise Refused(NEEDS_TRANSCRIPTION.format(name=name))

    # saving ---------------------------------------------------------------------------
    async def _save(self, job: _Message, index: int, offered: Attachment) -> Attachment:
        await self._record(job, index, offered, "downloading")
        try:
            saved = await _SavedDownload(job, index, offered, self.limits).run()
        except (BadPath, OSError) as exc:
            logger.warning("%s: %s not saved (%s)", job.session_key, offered.name, exc)
            raise Refused(f"⚠️ {offered.name} could not be saved: {_reason(exc)}.") from None
        await self._record(job, index, saved, "saved")
        return saved

    # transcribing ---------------------------------------------------------------------
    async def _transcribed(self, job: _Message, index: int, saved: Attachment) -> Attachment:
        if saved.kind not in SPOKEN or self._transcriber is None:
            return saved
        try:
            transcript = await self._transcribe(job, saved)
        except TranscriptionFailed as failure:
            await self._say(job, f"⚠️ {saved.name} could not be transcribed: {failure.reason}.")
            return saved
        except (BadPath, OSError) as exc:
            await self._say(job, f"⚠️ {saved.name} could not be transcribed: {_reason(exc)}.")
            return saved
        heard = replace(saved, transcript=transcript)
        await self._record(job, index, heard, "saved")
        await self._say(job, f"🎤 {transcript}")
        return heard

    async def _transcribe(self, job: _Message, saved: Attachment) -> str:
        """Read through a descriptor opened without following symlinks, so a swapped
        ``inbox`` cannot make the gateway upload a file from elsewhere."""
        assert self._transcriber is not None
        name = saved.path.removeprefix(f"{INBOX}/")
        with Inbox(job.workspace) as inbox:
            fd = await asyncio.to_thread(inbox.open_saved, name)
        try:
            return await self._transcriber.transcribe(
                Path(f"/proc/self/fd/{fd}"), saved.name, saved.mime
            )
        finally:
            os.close(fd)

    # the store and the chat -----------------------------------------------------------
    async def _record(
        self, job: _Message, index: int, attachment: Attachment, state: AttachmentState,
        error: str = "",
    ) -> None:  # fmt: skip
        record = AttachmentRecord(job.origin, index, job.session_key, attachment, state, error)
        try:
            await self._store.put_attachment(record)
        except StoreError as exc:
            logger.error("%s: attachment %d of %s not recorded (%s)", job.session_key, index,
                         job.origin, exc)  # fmt: skip

    async def _say(self, job: _Message, text: str) -> None:
        await self._delivery.notice(job.place.outbound, job.place.chat, text)


class _SavedDownload:
    """One file streamed from the platform into the inbox (see the module docstring)."""

    def __init__(
        self, job: _Message, index: int, offered: Attachment, limits: IntakeLimits
    ) -> None:
        self.job, self.offered, self.limit = job, offered, limits.max_bytes
        self.seconds = limits.deadline.seconds(offered.size or limits.max_bytes)
        self.partial = partial_name(job.origin, index)
        self.size = 0
        self.digest = hashlib.sha256()

    async def run(self) -> Attachment:
        inbox = await asyncio.to_thread(Inbox, self.job.workspace)
        try:
            fd = await asyncio.to_thread(inbox.open_partial, self.partial)
            try:
                await self._fetch(fd)
            finally:
                os.close(fd)
            name = await asyncio.to_thread(inbox.publish, self.partial, self.offered.name)
        except BaseException:
            await asyncio.to_thread(inbox.discard, self.partial)
            raise
        finally:
            inbox.close()
        path = f"{INBOX}/{name}"
        return replace(self.offered, size=self.size, sha256=self.digest.hexdigest(), path=path)

    async def _fetch(self, fd: int) -> None:
        """The download into ``fd``, within its :class:`DownloadDeadline`."""
        try:
            async with asyncio.timeout(self.seconds):
                await self._stream_into(fd)
        except TimeoutError:
            logger.warning("%s: download of %s took over %.0f s; given up",
                           self.job.session_key, self.offered.name, self.seconds)  # fmt: skip
            raise Refused(_too_slow(self.offered.name, self.seconds)) from None

    async def _stream_into(self, fd: int) -> None:
        stream = self.job.adapter.download(self.offered)
        try:
            async for chunk in stream:
                self.size += len(chunk)
                if self.size > self.limit:
                    raise Refused(_over_limit(self.offered.name, self.limit))
                self.digest.update(chunk)
                await asyncio.to_thread(write_all, fd, chunk)
            await asyncio.to_thread(os.fsync, fd)
        except DownloadFailed as exc:
            raise Refused(f"⚠️ {self.offered.name} could not be downloaded: {exc}") from None
        except (Refused, OSError, asyncio.CancelledError):
            raise
        except Exception as exc:
            logger.exception("%s: download of %s failed", self.job.session_key, self.offered.name)
            reason = f"the download broke ({type(exc).__name__})"
            raise Refused(f"⚠️ {self.offered.name} could not be downloaded: {reason}.") from None
        finally:
            await _close(stream)


async def _close(stream: AsyncIterator[bytes]) -> None:
    """Stop the adapter's download early (its connection is released)."""
    if isinstance(stream, AsyncGenerator):
        await stream.aclose()


def _still_there(job: _Message, saved: Attachment) -> bool:
    """The saved file is in the inbox with the size its row says."""
    try:
        with Inbox(job.workspace) as inbox:
            return inbox.holds(saved.path.removeprefix(f"{INBOX}/"), saved.size)
    except (BadPath, OSError):
        return False


def _reason(exc: Exception) -> str:
    if isinstance(exc, BadPath):
        return str(exc)
    return (exc.strerror if isinstance(exc, OSError) else None) or type(exc).__name__


def _too_slow(name: str, seconds: float) -> str:
    return (
        f"⚠️ {name} could not be downloaded: it did not arrive within {seconds:.0f} s "
        "(the file server sent it too slowly). Please send it again."
    )


def _over_limit(name: str, limit: int, size: int | None = None) -> str:
    declared = f" ({megabytes(size)})" if size is not None else ""
    return (
        f"⚠️ {name} was not taken in: it is over the {megabytes(limit)} limit for files{declared}."
    )


def _left(message: UserMessage, saved: Sequence[Attachment]) -> UserMessage | None:
    """The message the turn runs with: transcripts first, then the caption; None when
    there is nothing for the model (no text and no file but unheard voice)."""
    heard = [file.transcript for file in saved if file.transcript]
    text = "\n\n".join([*heard, *([message.text] if message.text.strip() else [])])
    usable = any(file.kind not in SPOKEN or file.transcript for file in saved)
    if not text.strip() and not usable:
        return None
    return replace(message, text=text, attachments=tuple(saved))
