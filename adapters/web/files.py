"""Files the agent sends to a web conversation (``SendFile``), and how they are served.

A sent file is copied, in chunks, from its outbox snapshot into the conversation's spool
(``<spool>/<conversation>/sent/<file id>`` plus ``<file id>.json``): the link keeps working
whatever the sandboxed agent later does to its workspace, and after a restart. The file id
is derived from the call's outbox key (``f-<sha256 of the key, 24 hex>``), so a second
send of one key finds the file already kept and the feed item already shown: one item
(as reply chunks are, ``c-<key>``: docs/architecture.md, "Exactly once").

``GET /api/files/<file id>?conversation=<id>`` serves it to that conversation's page only
(another conversation, an unknown id → 404), always as a download::

    Content-Disposition: attachment; filename="<ASCII fallback>"; filename*=UTF-8''<name>
    X-Content-Type-Options: nosniff
    Content-Security-Policy: default-src 'none'; sandbox

and with its own type only when that type is inert (no HTML, XML, SVG, JavaScript: those
go as ``application/octet-stream``). A PNG, JPEG, GIF or WebP image is also shown as a
thumbnail in the page, from the same route. Sent files are kept :data:`SENT_FILE_TTL`
(7 days), then removed by the spool's sweep (the link then answers 404).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

from adapters.base import AdapterError
from adapters.offered import display_name, mime_of
from adapters.web.uploads import CHUNK_BYTES
from core.attachments import OutgoingFile

SENT_DIR = "sent"
SENT_FILE_TTL = 7 * 86400.0
THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_ACTIVE = re.compile(r"html|xml|svg|javascript|ecmascript|x-sh|xhtml")
FILE_ID = re.compile(r"f-[0-9a-f]{24}")


class SnapshotUnreadable(AdapterError):
    """The file to send is not a readable regular file (gone, a link, a folder)."""


@dataclass(frozen=True, slots=True)
class SentFile:
    id: str
    conversation: str
    name: str
    mime: str
    size: int
    created: float

    @property
    def url(self) -> str:
        return f"/api/files/{self.id}?conversation={self.conversation}"

    @property
    def thumbnail(self) -> bool:
        return self.mime in THUMBNAIL_TYPES

    def shown(self) -> dict[str, object]:
        """What the page shows for it: a link with the name and size (and a thumbnail)."""
        return {
            "name": self.name,
            "size": self.size,
            "mime": self.mime,
            "url": self.url,
            "image": self.thumbnail,
        }


def file_id_of(key: str | None) -> str:
    """The feed and route id of a sent file: from its outbox key (random without one)."""
    seed = key if key is not None else secrets.token_hex(16)
    return "f-" + hashlib.sha256(seed.encode()).hexdigest()[:24]


class SentFiles:
    """The sent files of every conversation, under ``root`` (the upload spool's root)."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root, self.limit = root, limit

    def find(self, conversation: str, file_id: str) -> SentFile | None:
        if FILE_ID.fullmatch(file_id) is None:
            return None
        meta = self._folder(conversation) / f"{file_id}.json"
        try:
            return SentFile(**json.loads(meta.read_text("utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def path_of(self, sent: SentFile) -> Path:
        return self._folder(sent.conversation) / sent.id

    def keep(self, conversation: str, file: OutgoingFile, file_id: str, now: float) -> SentFile:
        """Copy ``file``'s snapshot here (once: a kept id is returned as it is)."""
        kept = self.find(conversation, file_id)
        if kept is not None:
            return kept
        folder = self._folder(conversation)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = folder / f".partial-{file_id}"
        try:
            size = self._copy(Path(file.path), partial)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        name = display_name(file.name)
        sent = SentFile(file_id, conversation, name, mime_of(file.mime, name), size, now)
        partial.rename(folder / file_id)
        meta = folder / f".partial-{file_id}.json"
        meta.write_text(json.dumps(asdict(sent)), "utf-8")
        os.replace(meta, folder / f"{file_id}.json")
        return sent

    def _copy(self, source: Path, target: Path) -> int:
        try:
            descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise SnapshotUnreadable(f"{source.name}: cannot be read ({exc.strerror})") from None
        size = 0
        with os.fdopen(descriptor, "rb") as file, target.open("xb") as out:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise SnapshotUnreadable(f"{source.name}: not a regular file")
            while chunk := file.read(CHUNK_BYTES):
                size += len(chunk)
                if size > self.limit:
                    raise SnapshotUnreadable(f"{source.name}: over the {self.limit} byte limit")
                out.write(chunk)
        return size

    def sweep(self, now: float) -> None:
        """Remove sent files older than :data:`SENT_FILE_TTL`."""
        for meta in self.root.glob(f"*/{SENT_DIR}/f-*.json"):
            sent = self.find(meta.parent.parent.name, meta.name.removesuffix(".json"))
            if sent is None or now - sent.created > SENT_FILE_TTL:
                meta.with_suffix("").unlink(missing_ok=True)
                meta.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    meta.parent.rmdir()

    def _folder(self, conversation: str) -> Path:
        return self.root / conversation / SENT_DIR


def served_type(mime: str) -> str:
    """The ``Content-Type`` a sent file is served with: its own unless it is active."""
    return "application/octet-stream" if _ACTIVE.search(mime) else mime


def content_disposition(name: str) -> str:
    """``attachment`` with an ASCII ``filename`` fallback and the exact UTF-8 name in
    ``filename*`` (RFC 6266, RFC 5987)."""
    fallback = "".join(c if _plain_ascii(c) else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _plain_ascii(c: str) -> bool:
    return c.isascii() and c.isprintable() and c not in '"\\;'


def download_headers(sent: SentFile) -> dict[str, str]:
    return {
        "Content-Type": served_type(sent.mime),
        "Content-Disposition": content_disposition(sent.name),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, no-cache",
    }
