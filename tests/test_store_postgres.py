"""What only the PostgreSQL store does (core/store/postgres.py, docs/cluster.md): the test
server itself, fenced writes, NUL text, an unreachable server, concurrent migrations, a
newer or foreign schema, ``fail_running_turns`` sparing live sessions, ``turns.process_id``.
The contract shared with SQLite is in the other tests/test_store*.py files (``any_store``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from adapters.web.inbox import WebMessage
from core.store.base import PairingCode, StoreError, StoreUnavailable
from core.store.fencing import Fence, Fenced, fenced
from core.store.pg_connection import mask_url, translated
from core.store.pg_migrations import PG_LATEST_VERSION, PG_MIGRATIONS
from core.store.postgres import PgStore, open_pg_store
from core.types import ChatMessage
from gateway.config.sections import mask_url as gateway_mask_url
from tests.support.postgres import PostgresMissing, PostgresServer, find_bindir, free_port

LEASE = "session:telegram:dm:1"
ME = "gw-a/0000000a"
OTHER = "gw-b/0000000b"


@pytest.fixture
async def admin(pg_store: PgStore) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own to the store's database, standing for another process."""
    conn = await asyncpg.connect(pg_store.dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def grant(conn: asyncpg.Connection, name: str, owner: str, epoch: int, ttl: float) -> None:
    """Give lease ``name`` to ``owner`` at ``epoch``, ending ``ttl`` seconds from now."""
    await conn.execute(
        "INSERT INTO leases (name, owner, epoch, expires_at)"
        " VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))"
        " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch,"
        " expires_at = excluded.expires_at",
        name,
        owner,
        epoch,
        ttl,
    )


async def count(conn: asyncpg.Connection, table: str) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))


async def test_the_test_server_gives_each_test_a_fresh_database(
    pg_server: PostgresServer, pg_url: str
) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        tables = await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        settings = {
            name: await conn.fetchval(f"SHOW {name}")
            for name in ("fsync", "synchronous_commit", "full_page_writes", "max_connections")
        }
    finally:
        await conn.close()
    assert tables == 0
    assert settings == {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "200",
    }
    assert pg_url.startswith(f"postgresql://postgres@127.0.0.1:{pg_server.port}/t_")


def test_a_missing_postgresql_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(PostgresMissing) as missing:
        find_bindir(path=str(tmp_path), debian_glob=str(tmp_path / "*" / "bin"))
    assert "`make postgres`" in str(missing.value)
    assert "apt-get install postgresql" in str(missing.value)


def test_the_debian_binaries_are_found_when_initdb_is_not_on_path(tmp_path: Path) -> None:
    debian = tmp_path / "lib" / "postgresql"
    for version in ("9.6", "15", "13"):
        (debian / version / "bin").mkdir(parents=True)
        (debian / version / "bin" / "initdb").touch()
    found = find_bindir(path=str(tmp_path), debian_glob=str(debian / "*" / "bin"))
    assert found == debian / "15" / "bin"


# fencing ---------------------------------------------------------------------------


async def test_a_fenced_write_is_refused_after_a_takeover_and_writes_nothing(
    pg_store: PgStore, admin: asyncpg.Connection
) -> None:
    await grant(admin, LEASE, ME, 1, ttl=30)
    mine = Fence(LEASE, ME, 1)
    with fenced(mine):
        session = await pg_store.create_session("telegram:dm:1", "default")
        await pg_store.append_message(session.id, None, ChatMessage("user", "while mine"))
    await grant(admin, LEASE, OTHER, 2, ttl=30)  # another process took the session over

    with fenced(mine), pytest.raises(Fenced, match=f"lease {LEASE} \\(epoch 1\\)"):
        await pg_store.append_message(session.id, None, ChatMessage("user", "too late"))
    with fenced(mine), pytest.raises(Fenced):
        # a two-step write (DELETE + INSERT) is fenced too
        await pg_store.put_pairing_code(PairingCode("h", "telegram", "1", "Ann", "1", 1.0, 2.0))

    assert [m.message.content for m in await pg_store.load_active_messages(session.id)] == [
        "while mine"
    ]
    assert await count(admin, "pairing_codes") == 0
    with fenced(Fence(LEASE, OTHER, 2)):  # the new owner writes
        await pg_store.append_message(session.id, None, ChatMessage("user", "new owner"))
    assert len(await pg_store.load_active_messages(session.id)) == 2


async def test_a_fenced_write_is_refused_once_the_lease_expired(
    pg_store: PgStore, admin: asyncpg.Connection
) -> None:
    await grant(admin, LEASE, ME, 3, ttl=-1)  # expired a second ago, nobody took it yet
    with fenced(Fence(LEASE, ME, 3)), pytest.raises(Fenced):
        await pg_store.create_session("telegram:dm:1", "default")
    assert await count(admin, "sessions") == 0
    assert await pg_store.get_active_session("telegram:dm:1") is None  # reads: never fenced


async def waiting_on_a_lock(conn: asyncpg.Connection, timeout: float = 10.0) -> None:
    """Return once some other backend of this database waits on a row lock (bounded)."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    for _ in range(int(timeout / 0.01)):
        if await conn.fetchval(sql):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("no write waited on the lease row")


async def test_a_write_racing_a_takeover_waits_for_it_and_is_refused(
    pg_store: PgStore, admin: asyncpg.Connection
) -> None:
    await grant(admin, LEASE, ME, 1, ttl=30)
    session = await pg_store.create_session("telegram:dm:1", "default")
    takeover = admin.transaction()
    await takeover.start()
    await admin.execute(
        "UPDATE leases SET owner = $2, epoch = epoch + 1 WHERE name = $1", LEASE, OTHER
    )
    with fenced(Fence(LEASE, ME, 1)):
        write = asyncio.create_task(
            pg_store.append_message(session.id, None, ChatMessage("user", "raced"))
        )
    await waiting_on_a_lock(admin)  # the fence check waits for the takeover to commit
    assert not write.done()
    await takeover.commit()

    with pytest.raises(Fenced):
        await write
    assert await pg_store.load_active_messages(session.id) == []


# text, errors ----------------------------------------------------------------------


async def test_nul_characters_are_stored_as_replacement_characters(pg_store: PgStore) -> None:
    session = await pg_store.create_session("telegram:dm:\x00", "default")
    blocks = [{"type": "text", "text": "in json \x00 stays"}]
    # the lone surrogate was repaired where the text entered (an adapter's normalize step,
    # core/text.py); the NUL is PostgreSQL's to replace
    typed = WebMessage("conversation", "1", "a\x00b \ud800").text
    await pg_store.append_message(session.id, None, ChatMessage("user", typed))
    await pg_store.append_message(session.id, None, ChatMessage("assistant", blocks))

    loaded = [m.message.content for m in await pg_store.load_active_messages(session.id)]

    assert session.key == "telegram:dm:\x00"  # the record given back is the caller's own
    assert await pg_store.get_active_session("telegram:dm:\ufffd") is not None
    assert loaded == ["a\ufffdb \ufffd", blocks]


async def test_an_unreachable_server_is_unavailable_named_without_its_password() -> None:
    url = f"postgresql://commonos:s3cret-pw@127.0.0.1:{free_port()}/commonos"

    with pytest.raises(StoreUnavailable) as refused:
        await open_pg_store(url, process_id=ME)

    message = str(refused.value)
    assert f"postgresql://commonos:***@127.0.0.1:{url.rsplit(':', 1)[1]}" in message
    assert "cannot connect to the store" in message
    assert "s3cret-pw" not in message and "s3cret-pw" not in repr(refused.value.__context__)


async def test_a_url_the_driver_cannot_read_is_one_store_error_without_its_password() -> None:
    url = "postgresql://gw:secretpw@127.0.0.1:notaport/commonos"
    with pytest.raises(StoreError) as refused:
        await open_pg_store(url, process_id=ME)
    assert not isinstance(refused.value, StoreUnavailable)
    assert str(refused.value).startswith(
        "postgresql://gw:***@127.0.0.1:notaport/commonos is not a usable PostgreSQL URL"
    )
    assert "secretpw" not in str(refused.value)


def test_a_pooled_connection_the_server_ended_while_idle_is_unavailable() -> None:
    """What asyncpg raised on a pooled connection after PostgreSQL's fast shutdown (seen in
    tests/cluster/test_e2e_outage.py): the server is gone, the same read works once it is
    back."""
    ended = asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    refused = pytest.raises(StoreUnavailable, match="cannot read: cannot switch to state 12")
    with refused, translated("postgresql://gw:pw@db/commonos", "read"):
        raise ended


async def test_too_many_connections_is_unavailable(pg_server: PostgresServer, pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            "DROP ROLE IF EXISTS commonos_full; CREATE ROLE commonos_full LOGIN CONNECTION LIMIT 0"
        )
    finally:
        await conn.close()
    url = pg_url.replace("postgres@", "commonos_full:pw@")

    with pytest.raises(StoreUnavailable, match="too many connections") as refused:
        await open_pg_store(url, process_id=ME)
    assert str(refused.value).startswith(mask_url(url) + ": cannot connect to the store")


def test_the_store_masks_urls_as_the_gateway_config_does() -> None:
    for url in (
        "postgresql://u:pw@h:5432/db",
        "postgresql://u@h/db",
        "postgresql://h/db",
        "postgresql://u:p@ss:w@rd@h/db",
        "not a url",
    ):
        assert mask_url(url) == gateway_mask_url(url)
    assert mask_url("postgresql://u:p@ss:w@rd@h/db") == "postgresql://u:***@h/db"


async def test_a_store_error_names_the_masked_url(pg_server: PostgresServer) -> None:
    database = await pg_server.create_database()
    url = pg_server.url(database).replace("postgres@", "postgres:hunter2@")
    store = await open_pg_store(url, process_id=ME, pool_size=2)
    try:
        with pytest.raises(StoreError) as refused:
            await store.start_turn("no such session", "t1")
    finally:
        await store.close()
    assert not isinstance(refused.value, StoreUnavailable)
    assert str(refused.value).startswith(mask_url(url) + ": cannot start turn 't1'")
    assert "hunter2" not in str(refused.value) and store.display == mask_url(url)


# migrations ------------------------------------------------------------------------


async def test_two_processes_starting_at_once_migrate_once(pg_url: str) -> None:
    stores = await asyncio.gather(
        *(open_pg_store(pg_url, process_id=f"p{i}/0000000{i}", pool_size=1) for i in range(3))
    )
    try:
        versions = await stores[0].pool.fetch("SELECT version FROM schema_version ORDER BY 1")
        session = await stores[1].create_session("k", "default")
        assert await stores[2].get_active_session("k") == session
    finally:
        await asyncio.gather(*(store.close() for store in stores))
    assert [row["version"] for row in versions] == [m.version for m in PG_MIGRATIONS]


async def test_a_newer_schema_is_refused_untouched(pg_url: str) -> None:
    store = await open_pg_store(pg_url, process_id=ME)
    await store.pool.execute(
        "INSERT INTO schema_version VALUES ($1, 'from the future', 0)", PG_LATEST_VERSION + 1
    )
    await store.close()

    with pytest.raises(StoreError) as refused:
        await open_pg_store(pg_url, process_id=ME)

    message = str(refused.value)
    assert message.startswith(mask_url(pg_url))
    assert f"schema version {PG_LATEST_VERSION + 1}" in message
    assert f"({PG_LATEST_VERSION})" in message


async def test_a_database_of_another_program_is_refused_untouched(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep')")
        with pytest.raises(StoreError, match="is a PostgreSQL database but not a CommonOS"):
            await open_pg_store(pg_url, process_id=ME)
        tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert [row["tablename"] for row in tables] == ["notes"]
        assert await conn.fetchval("SELECT body FROM notes") == "keep"
    finally:
        await conn.close()


# turns -----------------------------------------------------------------------------


async def test_fail_running_turns_leaves_the_turns_of_live_session_leases(
    pg_store: PgStore, admin: asyncpg.Connection
) -> None:
    keys = {"live": "telegram:dm:1", "expired": "telegram:dm:2", "unleased": "telegram:dm:3"}
    for name, key in keys.items():
        session = await pg_store.create_session(key, "default")
        await pg_store.start_turn(session.id, name)
    await grant(admin, f"session:{keys['live']}", OTHER, 1, ttl=30)
    await grant(admin, f"session:{keys['expired']}", OTHER, 1, ttl=-1)

    failed = await pg_store.fail_running_turns("the gateway restarted")

    statuses = {name: (await pg_store.get_turn(name)) for name in keys}
    assert failed == 2
    assert {name: turn.status for name, turn in statuses.items() if turn} == {
        "live": "running",
        "expired": "failed",
        "unleased": "failed",
    }
    assert statuses["expired"] is not None and statuses["expired"].exit_reason == "crashed"


async def test_a_started_turn_records_the_process_running_it(
    pg_store: PgStore, admin: asyncpg.Connection
) -> None:
    session = await pg_store.create_session("telegram:dm:1", "default")
    await pg_store.start_turn(session.id, "t1")
    assert await admin.fetchval("SELECT process_id FROM turns WHERE id = 't1'") == (
        pg_store.process_id
    )
