"""The dashboard shows how many entries memory holds per scope and never what they say
(README "Memory"): the gateway composed by the wiring, the dashboard's state over real
HTTP (SSE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from core.model.demo import DemoModel
from core.store.memory import memory_store
from core.store.sqlite import SqliteStore
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service
from tests.web.harness import EventStream, Running, close, web_config

SECRET = "Alice's diagnosis is confidential"


async def first_state(tmp_path: Path, store: SqliteStore, extra: dict[str, Any]) -> dict[str, Any]:
    service = build_service(web_config(tmp_path, extra), store, DemoModel())
    await service.start()
    running = Running(service, web_adapter_of(service), aiohttp.ClientSession(trust_env=False))
    try:
        stream = EventStream(await running.http.get(running.url + "/api/dashboard/events"))
        stream.start()
        try:
            frame = await stream.wait_for(
                lambda frames: next((f for f in frames if f.kind == "state"), None)
            )
        finally:
            await stream.close()
    finally:
        await close(running)
    assert frame is not None
    state: dict[str, Any] = frame.data
    return state


async def test_the_dashboard_counts_memory_and_never_shows_it(
    tmp_path: Path, store: SqliteStore
) -> None:
    memory = memory_store(store)
    await memory.add_memory("person:telegram:42", SECRET)
    await memory.add_memory("person:discord:7", "Bob likes tea")
    await memory.add_memory("chat:telegram:group:-100", "The group meets Fridays")
    state = await first_state(tmp_path, store, {"memory": {"enabled": True}})
    assert state["memory"] == {"person": 2, "chat": 1, "profile": 0}
    shown = json.dumps(state)
    assert SECRET not in shown and "tea" not in shown and "Fridays" not in shown
    assert "memory" not in await first_state(tmp_path, store, {})
