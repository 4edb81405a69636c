"""Opening the configured store (gateway/stores.py): SQLite file or PostgreSQL URL, the
flock per SQLite file only, the process id, and the CLI commands on PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.store.base import PairingCode
from core.store.files import StoreFileInUse
from core.store.postgres import PgStore
from core.store.sqlite import SqliteStore
from gateway.app import Gateway, StartupError
from gateway.cli import inbox as dead_letters
from gateway.cli import pair as pair_cli
from gateway.config import Config, load_config
from gateway.stores import lock_store, new_process_id, open_configured_store
from tests.support.postgres import free_port


def config(home: Path, url: str | None = None, *, pool_size: int | None = None) -> Config:
    (home / "SOUL.md").write_text("You are terse.\n")
    store = f"[store]\npool_size = {pool_size}\n" if pool_size else ""
    (home / "config.toml").write_text(
        f'{store}[profiles.default]\nsystem_prompt_file = "SOUL.md"\n'
    )
    env = {"COMMONOS_HOME": str(home), "COMMONOS_WEB_LISTEN": f"127.0.0.1:{free_port()}"}
    if url is not None:
        env["COMMONOS_STORE_URL"] = url
    return load_config(env=env)


def test_a_process_id_is_the_name_or_host_and_pid_then_8_new_hex() -> None:
    named = new_process_id("gw-a")
    assert re.fullmatch(r"gw-a/[0-9a-f]{8}", named)
    assert new_process_id("gw-a") != named
    assert re.fullmatch(r".+:\d+/[0-9a-f]{8}", new_process_id(None))


async def test_no_url_opens_the_sqlite_file_and_a_url_opens_postgres(
    tmp_path: Path, pg_url: str
) -> None:
    sqlite = await open_configured_store(config(tmp_path), process_id="p/00000001")
    await sqlite.close()
    pg = await open_configured_store(config(tmp_path, pg_url, pool_size=3), process_id="p/00000002")
    try:
        assert isinstance(sqlite, SqliteStore) and sqlite.path == tmp_path / "commonos.db"
        assert isinstance(pg, PgStore) and pg.process_id == "p/00000002"
        assert pg.pool.get_max_size() == 3
    finally:
        await pg.close()


def test_the_lock_is_the_sqlite_files_and_postgres_takes_none(tmp_path: Path, pg_url: str) -> None:
    first = lock_store(config(tmp_path))
    try:
        assert first is not None and first.path == tmp_path / "commonos.db.lock"
        with pytest.raises(StoreFileInUse, match=re.escape(str(tmp_path / "commonos.db"))):
            lock_store(config(tmp_path))
        assert lock_store(config(tmp_path, pg_url)) is None
        assert lock_store(config(tmp_path, pg_url)) is None
    finally:
        assert first is not None
        first.release()


async def test_two_gateways_on_postgres_share_one_data_dir(tmp_path: Path, pg_url: str) -> None:
    first, second = Gateway(config(tmp_path, pg_url)), Gateway(config(tmp_path, pg_url))
    await first.start()
    try:
        await second.start()
        try:
            session = await first.store.create_session("telegram:dm:1", "default")
            await first.store.start_turn(session.id, "t1")
            await second.store.start_turn(session.id, "t2")
            assert isinstance(first.store, PgStore)
            rows = await first.store.pool.fetch("SELECT id, process_id FROM turns ORDER BY id")
        finally:
            await second.stop()
    finally:
        await first.stop()
    assert first.process_id != second.process_id
    assert [(r["id"], r["process_id"]) for r in rows] == [
        ("t1", first.process_id),
        ("t2", second.process_id),
    ]
    assert not (tmp_path / "commonos.db").exists()


async def test_a_gateway_on_an_unreachable_server_names_it_without_the_password(
    tmp_path: Path,
) -> None:
    gateway = Gateway(config(tmp_path, f"postgresql://gw:pa55word@127.0.0.1:{free_port()}/x"))
    with pytest.raises(StartupError) as refused:
        await gateway.start()
    assert "cannot open the store: postgresql://gw:***@127.0.0.1:" in str(refused.value)
    assert "pa55word" not in str(refused.value)


async def test_pair_and_inbox_commands_use_the_postgres_store(tmp_path: Path, pg_url: str) -> None:
    shared = config(tmp_path, pg_url)
    store = await open_configured_store(shared, process_id="p/00000003")
    try:
        await store.put_pairing_code(PairingCode("h1", "telegram", "42", "Ann", "42", 1.0, 9e9))
    finally:
        await store.close()

    listing = await_in_thread(pair_cli.list_lines, shared)
    dead = await_in_thread(dead_letters.list_dead, shared)

    assert "telegram:42" in listing and "Ann" in listing
    assert dead == ["no dead letters"]
    assert not (tmp_path / "commonos.db").exists()


def await_in_thread(command: object, shared: Config) -> str | list[str]:
    """Run a CLI command (which runs its own event loop) outside the test's loop."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(command, shared).result()  # type: ignore[arg-type]
