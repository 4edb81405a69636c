"""``commonos pair list | approve CODE | revoke PLATFORM:USER`` (docs/pairing.md).

Each opens the configured store directly (:mod:`gateway.stores`), like ``commonos
inbox``: it can run while the gateway runs (SQLite in WAL mode; PostgreSQL is shared).
The running gateway reads the store every
:attr:`gateway.inbound.pairing.PairingSettings.sync_seconds` (and at its start): it admits a user
approved here and tells them they are in, and it stops admitting a revoked one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.store.base import Store
from gateway.config import Config
from gateway.inbound.pairing import approve_code, expired_message, listing, parse_user
from gateway.stores import configured_store

T = TypeVar("T")
BY = "cli"
"""Who approved, as the store records it for ``commonos pair approve``."""


class PairProblem(Exception):
    """One line for the user; the command exits 1."""


async def _with_store(config: Config, work: Callable[[Store], Awaitable[T]]) -> T:
    async with configured_store(config) as store:
        return await work(store)


def run(config: Config, work: Callable[[Store], Awaitable[T]]) -> T:
    return asyncio.run(_with_store(config, work))


def act(config: Config, action: str, value: str) -> str:
    """``list``, ``approve`` CODE or ``revoke`` PLATFORM:USER: what to print."""
    if action == "list":
        return list_lines(config)
    if action == "approve":
        return approve(config, value)
    return revoke(config, value)


def list_lines(config: Config) -> str:
    async def work(store: Store) -> str:
        return listing(await store.pairing_codes(), await store.paired_users(), time.time())

    return run(config, work)


def approve(config: Config, code: str) -> str:
    async def work(store: Store) -> str:
        approval = await approve_code(store, code, BY, time.time())
        if approval.outcome == "expired" and approval.code is not None:
            raise PairProblem(expired_message(approval.code))
        if approval.user is None:
            raise PairProblem("no pending request has that code (see `commonos pair list`)")
        user = approval.user
        return (
            f"approved {user.name} ({user.platform}:{user.user_id}); the running gateway "
            "lets them in and tells them within seconds (or at its next start)"
        )

    return run(config, work)


def revoke(config: Config, user: str) -> str:
    target = parse_user(user, "")
    if target is None or not target[0]:
        raise PairProblem(f"expected PLATFORM:USER (e.g. telegram:12345), got {user!r}")

    async def work(store: Store) -> bool:
        return await store.unpair_user(*target)

    if not run(config, work):
        raise PairProblem(f"{target[0]}:{target[1]} is not paired (see `commonos pair list`)")
    return f"revoked {target[0]}:{target[1]}"
