"""The mailbox: durable messages between the processes of a cluster (docs/cluster.md).

Mail is a row of ``cluster_mail`` (:mod:`core.store.pg_cluster_tables`) addressed to a
*target*: a process id (events forwarded to the process running a session, results of
relayed calls) or a bot lease name (calls relayed to whoever owns that bot now). Sending
inserts the row and ``pg_notify(MAIL_CHANNEL, target)`` in one transaction, under the
sender's fence (a stale owner sends nothing); the notification fires on commit.

A process serves some targets. A dedicated connection LISTENs on the channel and does
nothing else (every query goes through the pool; connecting it, LISTEN and closing it
take turns under one lock, so it never runs two operations at once); a
notification naming a served target makes the mailbox *take* its untaken mail
(``FOR UPDATE SKIP LOCKED``: two processes serving the same target, as while a bot changes
owner, never both get one mail). NOTIFY is not replayed, so mail sent while nobody
listened is taken by the next :meth:`Mailbox.take` (the node calls it every heartbeat)
and after every reconnect of the listening connection. Each target's mail is handed to
its receiver in id order, one at a time; a receiver that raises is logged and the next
mail still goes through. Mail taken for a target unserved before its turn came (the bot
changed owner) is put back untaken for the target's next server.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from core.store.fencing import current_fence
from core.store.pg_cluster_tables import MAIL_CHANNEL, guard
from core.store.pg_connection import DRIVER_ERRORS

logger = logging.getLogger(__name__)

BATCH = 100
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
DRAIN_SECONDS = 5.0
"""How long :meth:`Mailbox.aclose` lets receivers finish mail already taken."""

_SEND = """INSERT INTO cluster_mail (target, kind, sender, payload)
    VALUES ($1, $2, $3, $4) RETURNING id"""
_NOTIFY = "SELECT pg_notify($1, $2)"
_TAKE = """UPDATE cluster_mail SET taken_at = clock_timestamp(), taken_by = $3 WHERE id IN (
        SELECT id FROM cluster_mail WHERE taken_at IS NULL AND target = ANY($1::text[])
        ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id, target, kind, sender, payload"""
_PUT_BACK = """UPDATE cluster_mail SET taken_at = NULL, taken_by = NULL
    WHERE taken_by = $1 AND target = ANY($2::text[]) AND NOT (id = ANY($3::bigint[]))"""
"""After a take whose outcome is unknown (the store went away mid-statement: it may have
committed with its rows never returned), this process's taken mail that never reached it
goes back, to be taken again."""
RECEIVED_KEPT = 10_000
"""Mail ids this process queued, kept to tell a cut-off take's rows from mail it has."""
_GIVE_BACK = """WITH back AS (
        UPDATE cluster_mail SET taken_at = NULL WHERE id = $1 RETURNING target)
    SELECT pg_notify($2, target) FROM back"""
_SWEEP = """DELETE FROM cluster_mail
    WHERE coalesce(taken_at, created_at) < clock_timestamp() - make_interval(secs => $1)"""


@dataclass(frozen=True, slots=True)
class Mail:
    """One message: where to (``target``), what it is (``kind``), from which process."""

    id: int
    target: str
    kind: str
    sender: str
    payload: str


Receive = Callable[[Mail], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
Connect = Callable[[str], Awaitable[asyncpg.Connection]]


@dataclass(slots=True)
class MailStats:
    """Counters since start: mail sent and taken, listen reconnects, receivers that raised."""

    sent: int = 0
    taken: int = 0
    reconnects: int = 0
    failed: int = 0


class Mailbox:
    """Sends mail and hands the mail of the targets this process serves to receivers."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        process_id: str,
        *,
        sleep: Sleep = asyncio.sleep,
        connect: Connect = asyncpg.connect,
    ) -> None:
        """``connect`` opens the listening connection (a test watches it)."""
        self.stats = MailStats()
        self._open = connect
        self._pool = pool
        self._dsn = dsn
        self._process_id = process_id
        self._sleep = sleep
        self._served: dict[str, Receive] = {}
        self._queues: dict[str, deque[Mail]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._taking = asyncio.Lock()
        self._received: deque[int] = deque(maxlen=RECEIVED_KEPT)
        self._unsure = False
        """A take failed with the store unreachable: its rows may be taken but never seen."""
        self._waker: asyncio.Task[None] | None = None
        self._again = False
        self._listen: asyncpg.Connection | None = None
        self._listening = asyncio.Lock()
        """Held by every operation on the listening connection (connect and LISTEN, close):
        one at a time, never two at once."""
        self._reconnect: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Listen for notifications on a dedicated connection, then take what waits."""
        self._started = True
        await self._connect()
        await self.take()

    def serve(self, target: str, receive: Receive) -> None:
        """Hand mail for ``target`` (this process's id, or a bot lease it owns) to ``receive``;
        mail already waiting for it is taken soon."""
        self._served[target] = receive
        if self._started:
            self._wake()

    def unserve(self, target: str) -> None:
        """Stop taking mail for ``target``; mail taken but not yet handed to its receiver
        goes back (untaken, notified) for the target's next server."""
        self._served.pop(target, None)

    async def send(self, target: str, kind: str, payload: str) -> int:
        """Store one mail and notify ``target`` on commit, under the current fence (Fenced:
        nothing stored); the mail's id."""
        fence = current_fence()
        async with self._pool.acquire() as conn, conn.transaction():
            await guard(conn, fence)
            mail_id: int = await conn.fetchval(_SEND, target, kind, self._process_id, payload)
            await conn.execute(_NOTIFY, MAIL_CHANNEL, target)
        self.stats.sent += 1
        return mail_id

    async def take(self) -> int:
        """Take every untaken mail of the served targets (skipping mail another process is
        taking) and queue each to its target's receiver in id order; how many."""
        if self._listen is not None and self._listen.is_closed() and self._reconnect is None:
            self._lost()
        async with self._taking:
            if self._unsure:
                await self._put_back_unseen()
            total = 0
            while self._served:
                try:
                    rows = await self._pool.fetch(
                        _TAKE, list(self._served), BATCH, self._process_id
                    )
                except DRIVER_ERRORS:
                    self._unsure = True
                    raise
                mails = sorted((Mail(**dict(row)) for row in rows), key=lambda mail: mail.id)
                for mail in mails:
                    self._queue(mail)
                total += len(mails)
                if len(mails) < BATCH:
                    break
            self.stats.taken += total
            return total

    async def sweep(self, older_than: float = 3600) -> int:
        """Delete mail taken more than ``older_than`` seconds ago, and mail nobody took in
        that long (its target is gone); how many."""
        status = await self._pool.execute(_SWEEP, older_than)
        return int(status.split()[-1])

    async def aclose(self) -> None:
        """Stop listening and taking; let receivers finish what was taken (bounded)."""
        self._closed = True
        for task in (self._reconnect, self._waker):
            if task is not None:
                task.cancel()
        async with self._listening:
            if self._listen is not None:
                self._listen.remove_termination_listener(self._on_terminated)
                await _close(self._listen)
                self._listen = None
        workers = list(self._workers.values())
        if workers:
            _, pending = await asyncio.wait(workers, timeout=DRAIN_SECONDS)
            for task in pending:
                task.cancel()

    def listening_pid(self) -> int | None:
        """The server process id of the listening connection (None while reconnecting)."""
        return None if self._listen is None else self._listen.get_server_pid()

    async def _connect(self) -> None:
        """A new listening connection (closed again if LISTEN fails on it)."""
        async with self._listening:
            if self._closed:
                return
            conn = await self._open(self._dsn)
            try:
                await conn.add_listener(MAIL_CHANNEL, self._on_notify)
            except BaseException:
                conn.terminate()
                raise
            conn.add_termination_listener(self._on_terminated)
            self._listen = conn

    def _on_notify(self, conn: asyncpg.Connection, pid: int, channel: str, payload: object) -> None:
        if payload in self._served:
            self._wake()

    def _on_terminated(self, conn: asyncpg.Connection) -> None:
        if conn is self._listen:
            self._lost()

    def _lost(self) -> None:
        self._listen = None
        if not self._closed and self._reconnect is None:
            logger.warning("mailbox: the listening connection was lost; reconnecting")
            self._reconnect = asyncio.create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        delay = BACKOFF_FIRST
        try:
            while not self._closed:
                await self._sleep(delay)
                try:
                    await self._connect()
                except DRIVER_ERRORS as error:
                    logger.warning("mailbox: reconnect failed (%s)", type(error).__name__)
                    delay = min(delay * 2, BACKOFF_MAX)
                    continue
                self.stats.reconnects += 1
                logger.info("mailbox: listening again")
                break
        finally:
            self._reconnect = None
        self._wake()

    def _wake(self) -> None:
        """Take soon; wakes arriving while a take runs coalesce into one more take."""
        if self._closed:
            return
        if self._waker is not None:
            self._again = True
            return
        self._waker = asyncio.create_task(self._take_while_woken())

    async def _take_while_woken(self) -> None:
        try:
            self._again = True
            while self._again and not self._closed:
                self._again = False
                await self.take()
        except DRIVER_ERRORS as error:
            logger.warning("mailbox: taking mail failed (%s); the heartbeat retries", error)
        finally:
            self._waker = None

    async def _put_back_unseen(self) -> None:
        """Mail this process took for its served targets but never queued goes back."""
        status = await self._pool.execute(
            _PUT_BACK, self._process_id, list(self._served), list(self._received)
        )
        self._unsure = False
        back = int(status.split()[-1])
        if back:
            logger.info("mailbox: %d mail(s) a cut-off take had taken go back", back)

    def _queue(self, mail: Mail) -> None:
        self._received.append(mail.id)
        self._queues.setdefault(mail.target, deque()).append(mail)
        if mail.target not in self._workers:
            self._workers[mail.target] = asyncio.create_task(self._deliver(mail.target))

    async def _deliver(self, target: str) -> None:
        queue = self._queues[target]
        try:
            while queue:
                mail = queue.popleft()
                receive = self._served.get(target)
                if receive is None:  # unserved meanwhile: back for its next server
                    await self._give_back(mail)
                    continue
                try:
                    await receive(mail)
                except Exception:
                    self.stats.failed += 1
                    logger.exception("mailbox: receiving mail %d (%s) failed", mail.id, mail.kind)
        finally:
            del self._workers[target]
            if not queue:
                del self._queues[target]

    async def _give_back(self, mail: Mail) -> None:
        try:
            await self._pool.execute(_GIVE_BACK, mail.id, MAIL_CHANNEL)
        except DRIVER_ERRORS as error:
            logger.warning(
                "mailbox: mail %d for %s lost its receiver (%s)", mail.id, mail.target, error
            )


async def _close(conn: asyncpg.Connection) -> None:
    """Close politely; a connection the server already ended is terminated."""
    try:
        await conn.close(timeout=DRAIN_SECONDS)
    except DRIVER_ERRORS:
        conn.terminate()
