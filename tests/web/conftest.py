"""Fixtures for the web chat tests: a running gateway with the web adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from core.model.base import ModelClient
from core.model.demo import DemoModel
from core.store.sqlite import SqliteStore
from tests.web.harness import Running, close, compose, web_config

WebGatewayFactory = Callable[..., Awaitable[Running]]


@pytest.fixture
async def web_gateway(tmp_path: Path, store: SqliteStore) -> AsyncIterator[WebGatewayFactory]:
    """``await web_gateway(model=..., extra={...}, **web_keys)`` → a started gateway."""
    started: list[Running] = []

    async def make(
        model: ModelClient | None = None, extra: dict[str, Any] | None = None, **web: Any
    ) -> Running:
        config = web_config(tmp_path, extra, **web)
        running = await compose(config, store, model or DemoModel())
        started.append(running)
        return running

    yield make
    for running in reversed(started):
        await close(running)
