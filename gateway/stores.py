"""Opening the configured store: one SQLite file, or a PostgreSQL database several
processes share (``[store] url``; docs/cluster.md).

Every command that opens the store goes through here (``commonos run`` via
:class:`gateway.app.Gateway`, ``commonos inbox``, ``commonos pair``):

* :func:`open_configured_store` — SQLite at ``[gateway] data_dir``/``commonos.db`` when no
  URL is set, else :func:`core.store.postgres.open_pg_store` with ``[store] pool_size``;
* :func:`lock_store` — the one-process rule is per SQLite *file* (an flock on
  ``<db>.lock``, :class:`core.store.files.StoreFileLock`); a PostgreSQL store takes no
  lock, so several processes may share one data directory too;
* :func:`new_process_id` — who this process is among those sharing a store:
  ``"<[cluster] name or host:pid>/<8 hex>"``, new at every start (written into
  ``turns.process_id``, used by the cluster's leases).

The SQLite and PostgreSQL backends are imported only when used.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from core.store.base import Store
from core.store.files import StoreFileLock
from gateway.config import Config
from gateway.config.sections import mask_url


def new_process_id(name: str | None) -> str:
    """``"<name>/<8 hex>"``; without a name, ``"<hostname>:<pid>/<8 hex>"``."""
    return f"{name or f'{socket.gethostname()}:{os.getpid()}'}/{uuid.uuid4().hex[:8]}"


def store_display(config: Config) -> str:
    """Where the store is, for logs and errors: the SQLite file, or the masked URL."""
    url = config.store.url
    return str(config.gateway.db_path) if url is None else str(mask_url(url))


def store_exists(config: Config) -> bool:
    """False only for a SQLite file not created yet (a read-only command has nothing to
    read and must not create it); a PostgreSQL store is always asked."""
    return config.store.postgres or config.gateway.db_path.exists()


def lock_store(config: Config) -> StoreFileLock | None:
    """Take the SQLite file's lock (``StoreFileInUse`` naming the holder, or ``OSError``);
    None on PostgreSQL, which several processes share."""
    if config.store.postgres:
        return None
    lock = StoreFileLock(config.gateway.db_path)
    lock.acquire()
    return lock


async def open_configured_store(config: Config, *, process_id: str) -> Store:
    """Open (and migrate) the configured store; ``StoreError`` naming it when it cannot be
    used, ``StoreUnavailable`` when a PostgreSQL server cannot be reached."""
    url = config.store.url
    if url is None:
        from core.store.sqlite import open_store

        return await open_store(config.gateway.db_path)
    from core.store.postgres import open_pg_store

    return await open_pg_store(url, process_id=process_id, pool_size=config.store.pool_size)


@asynccontextmanager
async def configured_store(config: Config) -> AsyncIterator[Store]:
    """The configured store for one CLI command, closed after (small pool: one command)."""
    if config.store.url is None:
        store = await open_configured_store(config, process_id=new_process_id(None))
    else:
        from core.store.postgres import open_pg_store

        store = await open_pg_store(config.store.url, process_id=new_process_id(None), pool_size=2)
    try:
        yield store
    finally:
        await store.close()
