"""Fixtures for the Telegram adapter tests: a real SQLite store, the adapter pointed at the
simulator, and an event sink that records what the adapter delivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.base import InboundEvent
from adapters.telegram import (
    PollSettings,
    TelegramAdapter,
    TelegramSettings,
    default_session_key,
)
from core.store.sqlite import SqliteStore, open_store
from tests.platform_sim.telegram_sim import TelegramSim

T = TypeVar("T")


class EventLog:
    """An event sink that records events; ``gate`` (when set) holds every delivery open."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.gate: asyncio.Event | None = None
        self._changed = asyncio.Condition()

    async def __call__(self, event: InboundEvent) -> None:
        self.events.append(event)
        async with self._changed:
            self._changed.notify_all()
        if self.gate is not None:
            await self.gate.wait()

    async def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:
        found: list[T] = []

        def check() -> bool:
            value = predicate()
            if value:
                found.append(value)
            return bool(value)

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(check)
        return found[0]

    async def next_event(self, count: int = 1, timeout: float = 5.0) -> InboundEvent:
        """Wait until ``count`` events arrived; return the last of them."""
        return await self.wait_for(lambda: len(self.events) >= count and self.events[-1], timeout)


def sim_settings(sim: TelegramSim, **changes: Any) -> TelegramSettings:
    values: dict[str, Any] = {
        "base_url": f"{sim.url}/bot",
        "base_file_url": f"{sim.url}/file/bot",
        "edit_interval": 0.05,
        "poll": PollSettings(timeout=1, backoff_initial=0.05, backoff_max=0.2),
    }
    values.update(changes)
    return TelegramSettings(**values)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    db = await open_store(tmp_path / "gateway.db")
    try:
        yield db
    finally:
        await db.close()


@pytest.fixture
def events() -> EventLog:
    return EventLog()


AdapterFactory = Callable[..., Awaitable[TelegramAdapter]]


@pytest.fixture
async def start_adapter(
    telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> AsyncIterator[AdapterFactory]:
    """Start a TelegramAdapter on the simulator; every adapter started is stopped after."""
    started: list[TelegramAdapter] = []

    async def start(
        *,
        sink: Any = None,
        db: Any = None,
        key_rule: Any = default_session_key,
        settled: Any = None,
        **changes: Any,
    ) -> TelegramAdapter:
        settings = sim_settings(telegram_sim, **changes)
        adapter = TelegramAdapter(telegram_sim.token, db or store, settings, key_rule, settled)
        started.append(adapter)
        await adapter.start(sink or events)
        return adapter

    try:
        yield start
    finally:
        for adapter in started:
            await adapter.stop()


@pytest.fixture
async def adapter(start_adapter: AdapterFactory) -> TelegramAdapter:
    return await start_adapter()
