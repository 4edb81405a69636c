"""Fixtures for the gateway tests: a running gateway, stopped and closed afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.fakes import ScriptedModel, Step
from tests.gateway.harness import Gateway, GatewayFactory, build_gateway


@pytest.fixture
def running(tmp_path: Path) -> GatewayFactory:
    """``async with running(Step(...), ...) as gw:`` — a gateway with a scripted model."""

    @asynccontextmanager
    async def start(*steps: Step, **options: Any) -> AsyncIterator[Gateway]:
        gateway = await build_gateway(tmp_path, ScriptedModel(*steps), **options)
        try:
            yield gateway
        finally:
            gateway.gate.set()
            await gateway.service.stop()
            await gateway.store.close()

    return start
