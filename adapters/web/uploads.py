"""Files a page uploads before it sends them with a message: the web chat's spool.

``POST /api/upload?conversation=<id>`` (multipart, one file part) streams the file into
the conversation's own spool directory, ``<spool>/<conversation>/<upload id>`` plus a
``<upload id>.json`` that names it — never into the session's workspace: the gateway's
intake copies it there once the message is sent and its sender admitted
(docs/attachments.md). The conversation id is who the viewer is (every browser logged in
is ``[web] name``; a conversation id is known only to its page), so an upload id is only
ever honoured for the conversation that uploaded it.

Rules:

* **Size**: at most ``max_bytes`` (``[attachments] max_bytes``). The body is counted as
  it arrives, in chunks; past the limit the partial file is deleted and the upload
  refused (413) — it is never held whole, in memory or on disk.
* **Names** are neutralised for display, **types** checked loosely and the **kind**
  follows the type (:mod:`adapters.offered`).
* **Lifetime** (on the injected wall clock, so it holds across restarts): an upload not
  sent with a message within :data:`UNSENT_TTL` (1 hour) is removed; one that was sent is
  kept :data:`SENT_TTL` (1 day) so the intake can still copy it after a restart, then
  removed. A partial file left by a crash goes with the unsent ones. The spool is swept
  when the adapter starts and on every upload.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from adapters.offered import display_name, kind_of, mime_of
from core.attachments import Attachment

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
UNSENT_TTL = 3600.0
SENT_TTL = 86400.0
CHUNK_BYTES = 64 * 1024
_PARTIAL = ".partial-"
_META = ".json"

Clock = Callable[[], float]


class UploadTooLarge(Exception):
    """The upload is over the limit (its partial file is already deleted)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"file: larger than the {limit} byte limit ({_mib(limit)})")
        self.limit = limit


class UnknownUpload(LookupError):
    """No such upload in this conversation (another's, expired, or never made)."""


@dataclass(frozen=True, slots=True)
class Upload:
    id: str
    conversation: str
    name: str
    mime: str
    size: int
    created: float
    sent_at: float | None = None

    def offered(self) -> Attachment:
        """The attachment an event carries for it (``source`` = the upload id)."""
        return Attachment(kind_of(self.mime), self.name, self.mime, self.size, source=self.id)


class UploadSpool:
    """The spool directories of every conversation (the rules in the module docstring)."""

    def __init__(
        self,
        root: Path,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        clock: Clock = time.time,
        unsent_ttl: float = UNSENT_TTL,
        sent_ttl: float = SENT_TTL,
    ) -> None:
        self.root, self.max_bytes, self.clock = root, max_bytes, clock
        self.unsent_ttl, self.sent_ttl = unsent_ttl, sent_ttl

    async def receive(
        self, conversation: str, name: str, mime: str, chunks: AsyncIterator[bytes]
    ) -> Upload:
        """Stream ``chunks`` into the conversation's spool; over the limit → nothing kept,
        :class:`UploadTooLarge`."""
        self.sweep()
        folder = self.root / conversation
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        upload_id = secrets.token_hex(16)
        partial = folder / f"{_PARTIAL}{upload_id}"
        try:
            size = await self._write(partial, chunks)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        shown = display_name(name)
        upload = Upload(upload_id, conversation, shown, mime_of(mime, shown), size, self.clock())
        partial.rename(folder / upload_id)
        self._save(upload)
        return upload

    async def _write(self, partial: Path, chunks: AsyncIterator[bytes]) -> int:
        size = 0
        out = await asyncio.to_thread(partial.open, "xb")
        with out:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.max_bytes:
                    raise UploadTooLarge(self.max_bytes)
                await asyncio.to_thread(out.write, chunk)
        return size

    def find(self, conversation: str, upload_id: str) -> Upload:
        """This conversation's upload ``upload_id``, or :class:`UnknownUpload`."""
        meta = self.root / conversation / f"{upload_id}{_META}"
        try:
            data = json.loads(meta.read_text("utf-8"))
            return Upload(**data)
        except (OSError, ValueError, TypeError):
            raise UnknownUpload(f"uploads: no upload {upload_id} in this conversation") from None

    def claim(self, conversation: str, upload_ids: Iterable[str]) -> tuple[Upload, ...]:
        """The uploads a message sends, all of this conversation (else
        :class:`UnknownUpload` and none is touched); each is marked sent."""
        uploads = tuple(self.find(conversation, upload_id) for upload_id in upload_ids)
        now = self.clock()
        for upload in uploads:
            if upload.sent_at is None:
                self._save(replace(upload, sent_at=now))
        return uploads

    def path_of(self, upload_id: str) -> Path | None:
        """The spooled file of ``upload_id`` (an attachment's ``source``), if still kept."""
        if not re.fullmatch(r"[0-9a-f]{32}", upload_id):
            return None
        return next(iter(self.root.glob(f"*/{upload_id}")), None)

    async def chunks(self, upload_id: str) -> AsyncIterator[bytes]:
        """The spooled file's bytes, :data:`CHUNK_BYTES` at a time; :class:`UnknownUpload`
        when it is gone."""
        path = self.path_of(upload_id)
        if path is None:
            raise UnknownUpload(upload_id)
        file = await asyncio.to_thread(path.open, "rb")
        with file:
            while chunk := await asyncio.to_thread(file.read, CHUNK_BYTES):
                yield chunk

    def sweep(self) -> int:
        """Remove what the lifetime rules say is over; returns how many files went."""
        if not self.root.is_dir():
            return 0
        removed = 0
        now = self.clock()
        for folder in self.root.iterdir():
            if folder.is_dir():
                removed += self._sweep_folder(folder, now)
        return removed

    def _sweep_folder(self, folder: Path, now: float) -> int:
        removed = 0
        for entry in folder.iterdir():
            if entry.name.startswith(_PARTIAL) and _age(entry, now) > self.unsent_ttl:
                entry.unlink(missing_ok=True)
                removed += 1
            elif entry.name.endswith(_META) and self._expired(folder, entry.name, now):
                (folder / entry.name.removesuffix(_META)).unlink(missing_ok=True)
                entry.unlink(missing_ok=True)
                removed += 1
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty
        return removed

    def _expired(self, folder: Path, meta_name: str, now: float) -> bool:
        try:
            upload = self.find(folder.name, meta_name.removesuffix(_META))
        except UnknownUpload:
            return True
        if upload.sent_at is None:
            return now - upload.created > self.unsent_ttl
        return now - upload.sent_at > self.sent_ttl

    def _save(self, upload: Upload) -> None:
        folder = self.root / upload.conversation
        temporary = folder / f"{_PARTIAL}{upload.id}{_META}"
        temporary.write_text(json.dumps(asdict(upload)), "utf-8")
        os.replace(temporary, folder / f"{upload.id}{_META}")

    def remove_all(self) -> None:
        """Delete the whole spool (a temporary one, at the adapter's stop)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"
