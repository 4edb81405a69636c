"""Files the agent sends (``send_file``): queued during the turn, sent after its reply.

docs/attachments.md, "Outbound". Two halves:

* :meth:`FileDelivery.queue`, bound to the turn's key and chat, is a turn's ``on_file``
  (:data:`core.agent.turn.QueueFile`): it checks the chat can take the file — the platform's
  ``capabilities.upload_limit`` (0: "this chat cannot receive files"; a larger file:
  "<name> is over <Platform>'s <N> MB upload limit", the tool's result) — writes the
  checked bytes into the :class:`Spool` (``<data dir>/outbox/<key>/<name>``, outside every
  workspace: no sandboxed command can change or replace what is sent) and keeps the file in
  the store (``Store.queue_file``, the outbox for files) with the chat it goes to.
* :meth:`FileDelivery.after_turn` runs after the turn's reply is delivered — also after a
  replayed update's redelivery and after a failed turn's apology — and, for a session with
  files to send, sends the session's unsent files in the order queued, each as a
  ``SendFile`` through the bot's pipeline: the row is marked started just before the call
  and sent just after, the call carries the
  row's key and, for one that was in flight when the process stopped, when that send began
  (``in_flight_since``), so a platform with an idempotency mechanism shows it once (the
  same exactly-once rules as reply chunks: docs/architecture.md, "Exactly once").

The store is read only for a session known to hold files to send: one whose turn queued a
file in this process, one whose file failed for now, and the sessions a previous run left
files unsent in — read once at start-up (:meth:`FileDelivery.load_unsent`); their files go
after the session's next reply (a replayed update's, usually), so a file still follows the
reply it belongs to. A turn that queued no file costs no read, and no call: the turns ask
:meth:`FileDelivery.after_turn` only for a session in :attr:`FileDelivery.pending`.

A refusal for good (forbidden, too large for the platform, chat gone, the spooled file
unreadable) marks the row failed and tells the chat in one plain notice naming the file; a
rate limit past its bounds or a connection failure leaves the row for the next delivery in
the session, and a shutdown mid-send leaves it for the replay.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from adapters.base import AdapterError, ChatRef, Forbidden, MessageGone, RateLimited, TooLong
from adapters.calls import SendFile
from core.agent.turn import TurnResult
from core.attachments import OutgoingFile
from core.store.base import QueuedFile, Store, StoreError
from core.tools.limits import megabytes
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import ChatDirectory, Place
from gateway.outbound.pipeline import Outbound
from gateway.outbound.rate_limits import MAX_ATTEMPTS, Sleep, with_rate_limits
from gateway.turns.workspace_files import safe_name

logger = logging.getLogger(__name__)

CANNOT_RECEIVE = "this chat cannot receive files"
STOPPED = "its turn was stopped"
PERMANENT = (Forbidden, TooLong, MessageGone, OSError)
"""Errors after which sending the same file again cannot work."""
SPOOL_KEEP_SECONDS = 24 * 3600
"""How long a file stays in the spool after it was queued (the terminal chat shows its
path; a file still unsent by then is reported unreadable when its turn comes)."""


class Spool:
    """Where queued files wait to be sent: one directory per file key, readable only by the
    gateway's user, never inside a workspace (docs/attachments.md, "Outbound")."""

    def __init__(self, root: Path | None = None, *, clock: Callable[[], float] = time.time):
        self._root, self._clock = root, clock
        self._temporary = False

    @property
    def root(self) -> Path:
        """The spool's directory (none given: a temporary one, made when first needed and
        removed by :meth:`close`)."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="commonos-out-"))
            self._temporary = True
        return self._root

    def close(self) -> None:
        """Remove the spool if it is a temporary one (a configured one is kept: its files
        are sent after a restart)."""
        if self._temporary and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root, self._temporary = None, False

    def keep(self, file: OutgoingFile, content: bytes) -> Path:
        """Write ``content`` as ``<root>/<key>/<safe name>`` (whole or not at all; the
        same key again rewrites it) and sweep files past :data:`SPOOL_KEEP_SECONDS`."""
        self._sweep()
        folder = self.root / file.key
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / safe_name(file.name, file.mime)
        temporary = folder / ".writing"
        with open(temporary, "wb") as handle:
            handle.write(content)
        os.replace(temporary, path)
        return path

    def _sweep(self) -> None:
        if not self.root.is_dir():
            return
        oldest = self._clock() - SPOOL_KEEP_SECONDS
        for folder in self.root.iterdir():
            if folder.stat().st_mtime < oldest:
                shutil.rmtree(folder, ignore_errors=True)


class FileDelivery:
    def __init__(
        self,
        store: Store,
        directory: ChatDirectory,
        delivery: Delivery,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        attempts: int = MAX_ATTEMPTS,
        spool: Spool | None = None,
    ) -> None:
        self._store, self._directory, self._delivery = store, directory, delivery
        self.spool = spool if spool is not None else Spool()
        self._clock, self._sleep, self._attempts = clock, sleep, attempts
        self.pending: set[str] = set()
        """Keys of the sessions with files to send (the only ones :meth:`after_turn` reads;
        the turns call it only for these: a turn that queued no file enters nothing here)."""

    async def load_unsent(self) -> None:
        """At start-up: the sessions a previous run left files unsent in, whose next turn's
        end sends them (one read)."""
        try:
            self.pending.update(await self._store.unsent_file_sessions())
        except StoreError as exc:
            logger.error("files a previous run left unsent not read (%s)", exc)

    # queueing (during the turn) -------------------------------------------------------
    async def queue(
        self, session_key: str, place: Place | None, file: OutgoingFile, content: bytes
    ) -> str | None:
        """Queue ``file`` for the chat ``place`` of ``session_key``'s turn (a turn's
        ``on_file``, :data:`core.agent.turn.QueueFile`, is this bound to its key and
        place). Returns why the file cannot be sent, None when it is queued."""
        refusal = refusal_for(place, file)
        if refusal is not None or place is None:
            return refusal or CANNOT_RECEIVE
        try:
            path = await asyncio.to_thread(self.spool.keep, file, content)
        except OSError as exc:
            logger.error(
                "%s: file %s not kept in %s (%s)", session_key, file.name, self.spool.root, exc
            )
            return "the gateway could not keep the file to send (its spool is not writable)"
        try:
            return await self._keep(session_key, place.chat, replace(file, path=str(path)))
        except StoreError as exc:
            logger.error("%s: file %s not queued (%s)", session_key, file.name, exc)
            return "the gateway could not keep the file to send (its store failed)"

    async def _keep(self, session_key: str, chat: ChatRef, file: OutgoingFile) -> str | None:
        session = await self._store.get_active_session(session_key)
        if session is None:
            return "the conversation is not open any more"
        queued = QueuedFile(
            session.id, await self._running_turn(session.id), chat.platform, chat.chat_id,
            chat.thread_id, file, queued_at=self._clock(),
        )  # fmt: skip
        if not await self._store.queue_file(queued):
            logger.info("%s: file %s was already queued", session_key, file.key)
        self.pending.add(session_key)
        return None

    async def _running_turn(self, session_id: str) -> str:
        running = [t for t in await self._store.list_turns(session_id) if t.status == "running"]
        return running[-1].id if running else ""

    # sending (after the reply) --------------------------------------------------------
    async def after_turn(self, session_key: str, result: TurnResult, *, stopped: bool) -> None:
        """The turn's reply was delivered (or suppressed by ``/stop``): send the session's
        unsent files — or, after ``/stop``, give them up (the chat asked for quiet). A
        session with no file to send is not read."""
        if session_key not in self.pending:
            return
        self.pending.discard(session_key)
        session_id = result.session_id or await self._open_session(session_key)
        if stopped:
            await self.drop_unsent(session_id, STOPPED)
        elif await self.send_unsent(session_id) < 0:
            self.pending.add(session_key)  # a file failed for now: after the next reply

    async def _open_session(self, session_key: str) -> str:
        """The session of a turn that failed to open (its result names none)."""
        session = await self._store.get_active_session(session_key)
        return session.id if session is not None else ""

    async def send_unsent(self, session_id: str) -> int:
        """Send the session's files not yet arrived nor given up; how many arrived, or -1
        when one is kept for later (it failed for now, or the store could not be read)."""
        if not session_id:
            return 0
        try:
            unsent = await self._store.unsent_files(session_id)
        except StoreError as exc:
            logger.error("session %s: queued files not read (%s)", session_id, exc)
            return -1
        outcomes = [await self._send(queued) for queued in unsent]
        return -1 if None in outcomes else outcomes.count(True)

    async def drop_unsent(self, session_id: str, reason: str) -> None:
        """Give up the session's unsent files (their turn was stopped with ``/stop``)."""
        for queued in await self._store.unsent_files(session_id) if session_id else []:
            await self._store.mark_file_failed(queued.file.key, reason)

    async def _send(self, queued: QueuedFile) -> bool | None:
        """True: arrived; False: given up; None: kept for the session's next delivery
        (it failed for now, or its platform is not attached)."""
        chat = ChatRef(queued.platform, queued.chat_id, queued.thread_id)
        outbound = self._directory.outbound(queued.platform)
        file = queued.file
        if outbound is None:
            logger.error(
                "file %s for %s: platform %s is not attached", file.key, chat, chat.platform
            )
            return None
        since = queued.started_at if queued.in_flight else None
        await self._marked(self._store.mark_file_started(file.key), file, "started")
        call = SendFile(chat, file, file.caption, key=file.key, in_flight_since=since)
        try:
            message = await with_rate_limits(
                partial(outbound.perform, call),
                attempts=self._attempts, sleep=self._sleep, chat=chat, what="file",
            )  # fmt: skip
        except PERMANENT as exc:
            await self._give_up(outbound, chat, file, exc)
            return False
        except (RateLimited, AdapterError) as exc:
            logger.warning("file %s to %s not sent now (%s); kept for later", file.name, chat, exc)
            return None
        await self._marked(self._store.mark_file_sent(file.key, message.message_id), file, "sent")
        return True

    async def _marked(self, mark: Awaitable[None], file: OutgoingFile, what: str) -> None:
        """A mark that fails is logged, the file still goes (at least once, then)."""
        try:
            await mark
        except StoreError as exc:
            logger.error("file %s not marked %s (%s)", file.key, what, exc)

    async def _give_up(
        self, outbound: Outbound, chat: ChatRef, file: OutgoingFile, exc: Exception
    ) -> None:
        reason = _reason(exc)
        logger.warning("file %s to %s refused for good: %s", file.name, chat, reason)
        await self._marked(self._store.mark_file_failed(file.key, reason), file, "failed")
        await self._delivery.notice(outbound, chat, f"⚠️ {file.name} could not be sent: {reason}.")


def refusal_for(place: Place | None, file: OutgoingFile) -> str | None:
    """Why ``file`` cannot go to ``place``'s chat (its platform's upload limit), or None."""
    limit = place.outbound.capabilities.upload_limit if place is not None else 0
    if limit <= 0 or place is None:
        return CANNOT_RECEIVE
    if file.size > limit:
        platform = place.chat.platform.capitalize()
        return f"{file.name} is over {platform}'s {megabytes(limit)} upload limit"
    return None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"the file could not be read ({exc.strerror or type(exc).__name__})"
    return str(exc) or type(exc).__name__
