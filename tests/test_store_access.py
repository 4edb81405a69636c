"""Schema version 9: pairing codes, paired users, per-session settings, identity links and
link codes (core/store/access.py, core/store/settings.py). Every test works on a real
SQLite file under ``tmp_path``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from core.store.base import LinkCode, PairedUser, PairingCode, SessionSettings, Store, StoreError
from core.store.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    PAIRING_SETTINGS_AND_LINKS,
    apply_migrations,
)
from core.store.sqlite import open_store

KEY = "telegram:dm:42"


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def code(
    code_hash: str, user_id: str = "42", *, platform: str = "telegram", at: float = 1.0
) -> PairingCode:
    return PairingCode(code_hash, platform, user_id, "Ann", "chat-" + user_id, at, at + 600.0)


def paired(user_id: str = "42", *, platform: str = "telegram", at: float = 1.0) -> PairedUser:
    return PairedUser(platform, user_id, "Ann", at, "owner-1")


def link_code(code_hash: str, user_id: str = "42", *, platform: str = "telegram") -> LinkCode:
    return LinkCode(code_hash, platform, user_id, 1.0, 301.0)


# pairing codes ---------------------------------------------------------------


async def test_pairing_codes_are_listed_oldest_first_and_by_platform(store: Store) -> None:
    await store.put_pairing_code(code("h2", "2", at=2.0))
    await store.put_pairing_code(code("h1", "1", at=1.0))
    await store.put_pairing_code(code("h3", "3", platform="discord", at=3.0))
    assert [c.code_hash for c in await store.pairing_codes()] == ["h1", "h2", "h3"]
    assert await store.pairing_codes("telegram") == [code("h1", "1"), code("h2", "2", at=2.0)]
    assert [c.code_hash for c in await store.pairing_codes("discord")] == ["h3"]


async def test_a_new_code_replaces_the_users_earlier_one_on_that_platform(
    store: Store,
) -> None:
    await store.put_pairing_code(code("old", "42"))
    await store.put_pairing_code(code("other-platform", "42", platform="discord"))
    await store.put_pairing_code(code("new", "42", at=5.0))
    assert sorted(c.code_hash for c in await store.pairing_codes()) == ["new", "other-platform"]
    assert await store.take_pairing_code("old") is None


async def test_a_code_is_taken_once(store: Store) -> None:
    await store.put_pairing_code(code("h1"))
    assert await store.take_pairing_code("h1") == code("h1")
    assert await store.take_pairing_code("h1") is None
    assert await store.take_pairing_code("never") is None
    assert await store.pairing_codes() == []


async def test_expired_codes_are_dropped_and_counted(store: Store) -> None:
    await store.put_pairing_code(code("early", "1", at=0.0))  # expires at 600
    await store.put_pairing_code(code("late", "2", at=1000.0))  # expires at 1600
    assert await store.drop_pairing_codes(before=700.0) == 1
    assert [c.code_hash for c in await store.pairing_codes()] == ["late"]
    assert await store.drop_pairing_codes(before=700.0) == 0


# paired users ------------------------------------------------------------------


async def test_pairing_a_user_replaces_and_unpairing_reports(store: Store) -> None:
    await store.pair_user(paired("42"))
    await store.pair_user(paired("7", platform="slack", at=2.0))
    await store.pair_user(PairedUser("telegram", "42", "Ann B", 3.0, "owner-2", announced=True))
    assert [(u.user_id, u.name, u.announced) for u in await store.paired_users("telegram")] == [
        ("42", "Ann B", True)
    ]
    assert len(await store.paired_users()) == 2
    assert await store.unpair_user("telegram", "42") is True
    assert await store.unpair_user("telegram", "42") is False
    assert [u.user_id for u in await store.paired_users()] == ["7"]


async def test_a_paired_user_is_marked_announced(store: Store) -> None:
    await store.pair_user(paired("42"))
    assert [u.announced for u in await store.paired_users()] == [False]
    await store.mark_paired_announced("telegram", "42")
    assert [u.announced for u in await store.paired_users()] == [True]
    with pytest.raises(StoreError, match="paired telegram user 9"):
        await store.mark_paired_announced("telegram", "9")


# per-session settings ---------------------------------------------------------


async def test_session_settings_default_to_none_and_are_replaced(store: Store) -> None:
    assert await store.session_settings(KEY) == SessionSettings()
    chosen = SessionSettings(model="fast", busy="interrupt", progress="off", verbose=False)
    await store.put_session_settings(KEY, chosen)
    assert await store.session_settings(KEY) == chosen
    await store.put_session_settings(KEY, SessionSettings(verbose=True))
    assert await store.session_settings(KEY) == SessionSettings(verbose=True)
    assert await store.session_settings("discord:dm:1") == SessionSettings()


# identity links and link codes -------------------------------------------------


async def test_link_codes_are_taken_once_and_replaced_per_identity(store: Store) -> None:
    await store.put_link_code(link_code("l1"))
    await store.put_link_code(link_code("l2"))
    await store.put_link_code(link_code("d1", platform="discord"))
    assert await store.take_link_code("l1") is None
    assert await store.take_link_code("l2") == link_code("l2")
    assert await store.take_link_code("l2") is None
    assert await store.take_link_code("d1") == link_code("d1", platform="discord")


async def test_identities_are_linked_relinked_and_unlinked(store: Store) -> None:
    assert await store.person_of("telegram", "42") is None
    await store.link_identity("telegram", "42", "p1")
    await store.link_identity("web", "ann", "p1")
    await store.link_identity("discord", "9", "p2")
    assert await store.person_of("web", "ann") == "p1"
    assert await store.identities_of("p1") == [("telegram", "42"), ("web", "ann")]
    await store.link_identity("discord", "9", "p1")  # replaces its earlier link
    assert await store.identities_of("p2") == []
    assert len(await store.identities_of("p1")) == 3
    assert await store.unlink_identity("web", "ann") is True
    assert await store.unlink_identity("web", "ann") is False
    assert await store.person_of("web", "ann") is None
    assert await store.identities_of("p1") == [("telegram", "42"), ("discord", "9")]


# durability and migration -------------------------------------------------------


async def test_everything_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "commonos.db"
    first = await open_store(path)
    await first.put_pairing_code(code("h1"))
    await first.pair_user(paired("7"))
    await first.put_session_settings(KEY, SessionSettings(model="fast"))
    await first.put_link_code(link_code("l1"))
    await first.link_identity("telegram", "42", "p1")
    await first.close()
    second = await open_store(path)
    try:
        assert await second.pairing_codes() == [code("h1")]
        assert await second.paired_users() == [paired("7")]
        assert await second.session_settings(KEY) == SessionSettings(model="fast")
        assert await second.take_link_code("l1") == link_code("l1")
        assert await second.person_of("telegram", "42") == "p1"
    finally:
        await second.close()


async def version_8_file(path: Path) -> None:
    """A store as version 8 left it: a session with one message."""
    before = tuple(m for m in MIGRATIONS if m.version < PAIRING_SETTINGS_AND_LINKS.version)
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, 0, before)
        await conn.execute(
            "INSERT INTO sessions (id, key, profile, created_at, last_active_at)"
            " VALUES ('s1', ?, 'default', 1.0, 1.0)",
            (KEY,),
        )
        await conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at)"
            " VALUES ('s1', 'user', 'kept', 1.0)"
        )


async def test_a_version_8_file_gains_the_tables_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    await version_8_file(path)
    store = await open_store(path)
    try:
        [message] = await store.load_active_messages("s1")
        await store.pair_user(paired("42"))
        await store.put_session_settings(KEY, SessionSettings(busy="queue"))
        users = await store.paired_users()
        chosen = await store.session_settings(KEY)
    finally:
        await store.close()
    assert message.message.content == "kept"
    assert users == [paired("42")] and chosen == SessionSettings(busy="queue")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (
            LATEST_VERSION,
        )
