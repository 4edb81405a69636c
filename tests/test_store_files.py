"""The data directory and the database files are private to the gateway's user."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from core.store.sqlite import open_store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_data_directory_and_database_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "home" / ".commonos"
    store = await open_store(data_dir / "commonos.db")
    try:
        await store.create_session("telegram:dm:1", "default")  # the WAL files exist now
        assert mode(data_dir) == 0o700
        for name in ("commonos.db", "commonos.db-wal", "commonos.db-shm"):
            assert mode(data_dir / name) == 0o600, name
    finally:
        await store.close()


async def test_an_existing_open_directory_and_database_are_tightened_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "shared"
    store = await open_store(data_dir / "commonos.db")
    await store.create_session("telegram:dm:1", "default")
    await store.close()
    data_dir.chmod(0o755)
    (data_dir / "commonos.db").chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="core.store.files"):
        store = await open_store(data_dir / "commonos.db")
    try:
        assert mode(data_dir) == 0o700 and mode(data_dir / "commonos.db") == 0o600
        assert await store.get_active_session("telegram:dm:1") is not None  # data intact
        tightened = [r.getMessage() for r in caplog.records]
        assert len(tightened) == 2
        assert all("tightened" in line and "open to other users" in line for line in tightened)
    finally:
        await store.close()
