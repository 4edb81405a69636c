"""The mailbox on a real PostgreSQL server: several Mailbox objects stand for several
processes; LISTEN/NOTIFY on real connections, no polling loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

import asyncpg
import pytest

from core.store.fencing import Fenced, fenced
from core.store.pg_connection import DRIVER_ERRORS, unavailable
from gateway.cluster.leases import Leases
from gateway.cluster.mailbox import Mail, Mailbox, Sleep
from tests.cluster.pg_pool import cluster_pool, expire
from tests.support.polling import until
from tests.support.postgres import PostgresServer

A = "a/00000001"
B = "b/00000002"
WAIT = 10.0

MakeMailbox = Callable[..., Mailbox]


@dataclass
class Inbox:
    """A receiver recording what it got; ``arrived`` is set once ``expect`` mails came."""

    expect: int = 1
    got: list[Mail] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self, mail: Mail) -> None:
        self.got.append(mail)
        if len(self.got) >= self.expect:
            self.arrived.set()

    async def wait(self) -> None:
        await asyncio.wait_for(self.arrived.wait(), WAIT)


@pytest.fixture
async def pool(pg_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with cluster_pool(pg_url) as opened:
        yield opened


@pytest.fixture
async def mailbox_of(pool: asyncpg.Pool, pg_url: str) -> AsyncIterator[MakeMailbox]:
    made: list[Mailbox] = []

    def make(process_id: str, sleep: Sleep = asyncio.sleep) -> Mailbox:
        mailbox = Mailbox(pool, pg_url, process_id, sleep=sleep)
        made.append(mailbox)
        return mailbox

    yield make
    for mailbox in made:
        await mailbox.aclose()


async def _untaken(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval("SELECT count(*) FROM cluster_mail WHERE taken_at IS NULL")
    return count


async def test_sent_mail_reaches_the_served_target_once_by_notify(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    a, b = mailbox_of(A), mailbox_of(B)
    inbox = Inbox()
    b.serve(B, inbox.receive)
    await b.start()
    mail_id = await a.send(B, "event", '{"n": 1}')
    await inbox.wait()
    assert inbox.got == [Mail(mail_id, B, "event", A, '{"n": 1}')]
    assert await b.take() == 0
    assert len(inbox.got) == 1
    assert await _untaken(pool) == 0
    assert (a.stats.sent, b.stats.taken) == (1, 1)


async def test_mail_sent_while_nobody_listened_is_taken_later(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    await mailbox_of(A).send(B, "event", "early")
    b = mailbox_of(B)
    inbox = Inbox()
    b.serve(B, inbox.receive)
    assert await b.take() == 1
    await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["early"]
    assert await _untaken(pool) == 0


async def test_start_takes_what_waited(mailbox_of: MakeMailbox) -> None:
    await mailbox_of(A).send(B, "event", "early")
    b = mailbox_of(B)
    inbox = Inbox()
    b.serve(B, inbox.receive)
    await b.start()
    await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["early"]


async def test_mail_for_targets_not_served_stays(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    a, b = mailbox_of(A), mailbox_of(B)
    inbox = Inbox()
    b.serve(B, inbox.receive)
    b.serve("bot:telegram:x", inbox.receive)
    b.unserve("bot:telegram:x")
    await a.send("bot:telegram:x", "call", "{}")
    await a.send("elsewhere", "event", "{}")
    assert await b.take() == 0
    assert await _untaken(pool) == 2


async def test_mail_taken_after_its_target_was_unserved_goes_back(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    a, old, new = mailbox_of(A), mailbox_of(B), mailbox_of("c/00000003")
    first, moved = Inbox(), Inbox()

    async def hand_over(mail: Mail) -> None:
        old.unserve("bot:telegram:x")
        await first.receive(mail)

    old.serve("bot:telegram:x", hand_over)
    await a.send("bot:telegram:x", "call", "1")
    await a.send("bot:telegram:x", "call", "2")
    await new.start()
    assert await old.take() == 2
    new.serve("bot:telegram:x", moved.receive)
    await first.wait()
    await moved.wait()
    assert [mail.payload for mail in first.got] == ["1"]
    assert [mail.payload for mail in moved.got] == ["2"]
    assert await _untaken(pool) == 0


async def test_two_servers_of_one_target_never_both_get_a_mail(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    count = 60
    a, old, new = mailbox_of(A), mailbox_of(B), mailbox_of("c/00000003")
    got: list[Mail] = []
    all_in = asyncio.Event()

    async def receive(mail: Mail) -> None:
        got.append(mail)
        if len(got) >= count:
            all_in.set()

    for server in (old, new):
        server.serve("bot:telegram:x", receive)
        await server.start()
    sent = await asyncio.gather(*(a.send("bot:telegram:x", "call", str(n)) for n in range(count)))
    await asyncio.gather(old.take(), new.take(), old.take(), new.take())
    await asyncio.wait_for(all_in.wait(), WAIT)
    assert sorted(mail.id for mail in got) == sorted(sent)
    assert old.stats.taken + new.stats.taken == count
    assert await _untaken(pool) == 0


async def test_lost_listen_connection_reconnects_and_takes_what_came_meanwhile(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    sleeping = asyncio.Event()
    wake = asyncio.Event()
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        sleeping.set()
        await wake.wait()

    a, b = mailbox_of(A), mailbox_of(B, sleep=sleep)
    inbox = Inbox()
    b.serve(B, inbox.receive)
    await b.start()
    killed = b.listening_pid()
    assert killed is not None
    assert await pool.fetchval("SELECT pg_terminate_backend($1)", killed)
    await asyncio.wait_for(sleeping.wait(), WAIT)
    assert b.listening_pid() is None
    await a.send(B, "event", "meanwhile")
    wake.set()
    await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["meanwhile"]
    assert b.stats.reconnects == 1
    assert b.listening_pid() not in (None, killed)
    await a.send(B, "event", "after")
    inbox.expect, inbox.arrived = 2, asyncio.Event()
    await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["meanwhile", "after"]
    assert delays == [0.05]


async def test_reconnect_backs_off_while_the_server_refuses(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool, pg_url: str, pg_server: PostgresServer
) -> None:
    allow = 'ALTER DATABASE "{}" ALLOW_CONNECTIONS {}'.format
    dbname = pg_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(pg_server.url("postgres"))
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        if len(delays) == 3:
            await admin.execute(allow(dbname, "true"))

    try:
        b = mailbox_of(B, sleep=sleep)
        inbox = Inbox()
        b.serve(B, inbox.receive)
        await b.start()
        await admin.execute(allow(dbname, "false"))
        await pool.execute("SELECT pg_terminate_backend($1)", b.listening_pid())
        await mailbox_of(A).send(B, "event", "meanwhile")
        await inbox.wait()
    finally:
        await admin.close()
    assert delays == [0.05, 0.1, 0.2]
    assert b.stats.reconnects == 1


async def test_send_under_a_lost_fence_raises_and_stores_nothing(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    a = mailbox_of(A)
    fence = await Leases(pool, A, 30.0).acquire("bot:telegram:x")
    assert fence is not None
    with fenced(fence):
        await a.send(B, "result", "while ours")
    await expire(pool, "bot:telegram:x")
    assert await Leases(pool, B, 30.0).acquire("bot:telegram:x") is not None
    with fenced(fence), pytest.raises(Fenced, match="no longer held"):
        await a.send(B, "result", "stale")
    payloads = await pool.fetch("SELECT payload FROM cluster_mail")
    assert [row["payload"] for row in payloads] == ["while ours"]
    assert a.stats.sent == 1


async def test_mail_reaches_each_target_in_order(mailbox_of: MakeMailbox) -> None:
    count = 40
    a, b = mailbox_of(A), mailbox_of(B)
    first, second = Inbox(expect=count), Inbox(expect=count)

    async def slow(mail: Mail) -> None:
        await asyncio.sleep(0)
        await first.receive(mail)

    b.serve(B, slow)
    b.serve("bot:telegram:x", second.receive)
    await b.start()
    for n in range(count):
        await a.send(B, "event", str(n))
        await a.send("bot:telegram:x", "call", str(n))
    await first.wait()
    await second.wait()
    for inbox in (first, second):
        assert [mail.payload for mail in inbox.got] == [str(n) for n in range(count)]


async def test_a_receiver_that_raises_is_logged_and_the_rest_goes_on(
    mailbox_of: MakeMailbox, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = mailbox_of(A), mailbox_of(B)
    inbox, other = Inbox(), Inbox()

    async def fragile(mail: Mail) -> None:
        if mail.payload == "bad":
            raise ValueError("cannot read it")
        await inbox.receive(mail)

    b.serve(B, fragile)
    b.serve("bot:telegram:x", other.receive)
    await a.send(B, "event", "bad")
    await a.send(B, "event", "good")
    await a.send("bot:telegram:x", "call", "also")
    with caplog.at_level(logging.ERROR, logger="gateway.cluster.mailbox"):
        assert await b.take() == 3
        await inbox.wait()
        await other.wait()
    assert [mail.payload for mail in inbox.got] == ["good"]
    assert [mail.payload for mail in other.got] == ["also"]
    assert b.stats.failed == 1
    [record] = caplog.records
    assert "receiving mail" in record.getMessage() and "event" in record.getMessage()
    assert record.exc_info is not None


async def test_sweep_deletes_old_taken_and_stale_mail(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool
) -> None:
    a = mailbox_of(A)
    old_taken = await a.send(B, "event", "old taken")
    new_taken = await a.send(B, "event", "new taken")
    stale = await a.send("gone/00000009", "event", "stale")
    waiting = await a.send(B, "event", "waiting")
    await pool.execute(
        "UPDATE cluster_mail SET taken_at = clock_timestamp() - interval '2 hours' WHERE id = $1",
        old_taken,
    )
    await pool.execute(
        "UPDATE cluster_mail SET taken_at = clock_timestamp() WHERE id = $1", new_taken
    )
    await pool.execute(
        "UPDATE cluster_mail SET created_at = clock_timestamp() - interval '2 hours' WHERE id = $1",
        stale,
    )
    assert await a.sweep(older_than=3600) == 2
    left = await pool.fetch("SELECT id FROM cluster_mail ORDER BY id")
    assert [row["id"] for row in left] == [new_taken, waiting]


class Watched(asyncpg.Connection):
    """A real listening connection that counts its operations running at once; LISTEN
    waits for ``gate`` when one is set."""

    made: ClassVar[list[Watched]] = []
    gate: ClassVar[asyncio.Event | None] = None
    overlaps: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.busy = 0
        Watched.made.append(self)

    async def _one(self, operation: Awaitable[None]) -> None:
        self.busy += 1
        Watched.overlaps += self.busy > 1
        try:
            await operation
        finally:
            self.busy -= 1

    async def add_listener(self, channel: str, callback: Any) -> None:
        async def listen() -> None:
            if Watched.gate is not None:
                await Watched.gate.wait()
            await super(Watched, self).add_listener(channel, callback)

        await self._one(listen())

    async def close(self, *, timeout: float | None = None) -> None:
        await self._one(super().close(timeout=timeout))


async def test_the_listening_connection_runs_one_operation_at_a_time_and_none_is_left_open(
    pool: asyncpg.Pool, pg_url: str
) -> None:
    """The listening connection is lost and its replacement is in the middle of LISTEN when
    the mailbox closes: no two operations ran on one connection, and none is left open."""
    Watched.made, Watched.gate, Watched.overlaps = [], None, 0
    b = Mailbox(pool, pg_url, B, connect=partial(asyncpg.connect, connection_class=Watched))
    b.serve(B, Inbox().receive)
    await b.start()
    Watched.gate = asyncio.Event()  # the next LISTEN waits
    assert await pool.fetchval("SELECT pg_terminate_backend($1)", b.listening_pid())
    await until(lambda: len(Watched.made) == 2 and Watched.made[1].busy == 1)

    await b.aclose()

    assert Watched.overlaps == 0
    assert [conn.is_closed() for conn in Watched.made] == [True, True]


async def test_after_a_database_restart_the_mailbox_listens_again_and_mail_arrives(
    mailbox_of: MakeMailbox, pg_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL stopped and started again: taking mail meanwhile fails as an unreachable
    store (never asyncpg's internal error), nothing is logged above a warning, and the
    mailbox listens again and gets the mail sent after the restart."""
    a, b = mailbox_of(A), mailbox_of(B, sleep=lambda _: asyncio.sleep(0.05))
    inbox = Inbox()
    b.serve(B, inbox.receive)
    await b.start()
    with caplog.at_level(logging.WARNING):
        await asyncio.to_thread(pg_server.halt)
        try:
            await until(lambda: b.listening_pid() is None)
            with pytest.raises(DRIVER_ERRORS) as caught:
                await b.take()
            assert unavailable(caught.value)
        finally:
            await asyncio.to_thread(pg_server.resume)
        await until(lambda: b.listening_pid() is not None)
        await a.send(B, "event", "after the restart")
        await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["after the restart"]
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.WARNING] == []


async def test_mail_a_cut_off_take_had_taken_goes_back_and_arrives_once(
    mailbox_of: MakeMailbox, pool: asyncpg.Pool, pg_server: PostgresServer
) -> None:
    """A take the outage cut off may have committed with its rows never returned: after
    a take that failed so, the taker's taken-but-never-seen mail goes back and is taken
    again; mail it had seen is not."""
    a, b = mailbox_of(A), mailbox_of(B)
    inbox = Inbox(expect=2)
    b.serve(B, inbox.receive)
    await a.send(B, "event", "seen")
    assert await b.take() == 1
    await until(lambda: len(inbox.got) == 1)
    await a.send(B, "event", "cut off")
    await asyncio.to_thread(pg_server.halt)
    try:
        with pytest.raises(DRIVER_ERRORS):
            await b.take()
    finally:
        await asyncio.to_thread(pg_server.resume)
    # what the cut-off take left had it committed: the mail taken by B, its rows lost
    await pool.execute(
        "UPDATE cluster_mail SET taken_at = clock_timestamp(), taken_by = $1"
        " WHERE payload = 'cut off'",
        B,
    )
    assert await b.take() == 1
    await inbox.wait()
    assert [mail.payload for mail in inbox.got] == ["seen", "cut off"]
    assert await b.take() == 0 and await _untaken(pool) == 0
