"""Pytest fixtures for the scripted model server (register with ``pytest_plugins``).

``model_server`` is a started :class:`ScriptedModelServer` in the test's event loop,
stopped after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.model_server import ScriptedModelServer


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer() as server:
        yield server
