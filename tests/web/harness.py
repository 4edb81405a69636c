"""The whole gateway with its web chat, for HTTP-level and browser tests.

:func:`compose` builds a :class:`GatewayService` from a real :class:`Config` through the
real wiring (``gateway.wiring.build_service``), with a real SQLite store, the web adapter
on a free loopback port, and either the offline demo model or the scripted model server.
:class:`EventStream` reads the chat's Server-Sent Events over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from adapters.web import WebAdapter
from core.dispatcher import SHUTDOWN_GRACE_SECONDS
from core.model.base import ModelClient
from core.store.sqlite import SqliteStore
from gateway.config import Config, parse_config
from gateway.service import GatewayService
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service

T = TypeVar("T")
WAIT = 10.0


def web_config(tmp_path: Path, extra: dict[str, Any] | None = None, **web: Any) -> Config:
    data: dict[str, Any] = {
        "gateway": {"data_dir": str(tmp_path)},
        "web": {"listen": "127.0.0.1:0", **web},
        "profiles": {"default": {"workspace": str(tmp_path / "workspace")}},
    }
    for section, values in (extra or {}).items():
        data.setdefault(section, {}).update(values)
    return parse_config(data, None, {})


@dataclass
class Running:
    service: GatewayService
    adapter: WebAdapter
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        assert self.adapter.url is not None
        return self.adapter.url.rstrip("/")

    async def post(self, path: str, body: dict[str, Any], **kwargs: Any) -> aiohttp.ClientResponse:
        return await self.http.post(self.url + path, json=body, **kwargs)

    async def send(self, conversation: str, text: str, client_id: str | None = None) -> Any:
        body = {"conversation": conversation, "id": client_id or new_id(), "text": text}
        async with await self.post("/api/send", body) as response:
            assert response.status == 202, await response.text()
            return await response.json()

    async def events(self, conversation: str, last_event_id: str | None = None) -> EventStream:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        response = await self.http.get(
            f"{self.url}/api/events", params={"conversation": conversation}, headers=headers
        )
        assert response.status == 200, await response.text()
        stream = EventStream(response)
        stream.start()
        return stream

    async def idle(self, conversation: str) -> None:
        key = f"web:dm:{conversation}"
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), WAIT)


def new_id() -> str:
    return secrets.token_hex(8)


async def compose(config: Config, store: SqliteStore, model: ModelClient) -> Running:
    service = build_service(config, store, model)
    adapter = web_adapter_of(service)
    await service.start()
    http = aiohttp.ClientSession(trust_env=False)
    return Running(service, adapter, http)


async def close(running: Running, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
    """Stop the run; its running turns get ``grace`` seconds (0: as a crash would)."""
    await running.http.close()
    await running.service.stop(grace)


@dataclass
class Frame:
    kind: str
    data: Any
    id: str | None


@dataclass
class EventStream:
    """The frames of one SSE response, collected by a reader task."""

    response: aiohttp.ClientResponse
    frames: list[Frame] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._read(), name="sse-reader")

    async def _read(self) -> None:
        fields: dict[str, str] = {}
        async for raw in self.response.content:
            line = raw.decode().rstrip("\n")
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if "event" in fields:
                frame = Frame(fields["event"], json.loads(fields["data"]), fields.get("id"))
                async with self._changed:
                    self.frames.append(frame)
                    self._changed.notify_all()
            fields = {}

    async def wait_for(self, predicate: Callable[[list[Frame]], T], timeout: float = WAIT) -> T:
        found: list[T] = []

        def check() -> bool:
            value = predicate(self.frames)
            if value:
                found.append(value)
            return bool(value)

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(check)
        return found[0]

    async def message_containing(self, text: str, timeout: float = WAIT) -> Frame:
        return await self.wait_for(lambda frames: _with_text(frames, text), timeout)

    async def close(self) -> None:
        self.response.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _with_text(frames: list[Frame], text: str) -> Frame | None:
    for frame in frames:
        if frame.kind in ("message", "edit") and text in frame.data.get("html", ""):
            return frame
    return None


def shown_messages(frames: list[Frame]) -> dict[str, dict[str, Any]]:
    """The conversation as the page would show it after applying ``frames`` in order."""
    shown: dict[str, dict[str, Any]] = {}
    for frame in frames:
        if frame.kind == "snapshot":
            shown = {m["id"]: dict(m) for m in frame.data["messages"]}
        elif frame.kind == "message":
            shown[frame.data["id"]] = dict(frame.data)
        elif frame.kind == "edit" and frame.data["id"] in shown:
            shown[frame.data["id"]].update(frame.data)
        elif frame.kind == "delete":
            shown.pop(frame.data["id"], None)
    return shown
