"""How envelopes reach the bolt app: Socket Mode (with a watchdog) or signed HTTP.

Socket Mode: slack-sdk's aiohttp ``SocketModeClient`` (through bolt's handler) is started
with ``connect_async`` — never ``start_async``, which would own the loop. The client
reconnects by itself on a ``disconnect`` envelope and when pongs stop for four ping
intervals; the watchdog covers what that misses (a connection left closed, a monitor that
died, a socket that neither delivers nor answers pings — the "deaf after a reconnect"
reports): every quarter of ``watchdog_seconds`` it checks when the connection was last
heard from (any frame, or a pong) and, past ``watchdog_seconds`` or when it is not
connected, replaces it with a new one (``connect_to_new_endpoint(force=True)``).

HTTP: bolt's aiohttp application on ``host:port`` at ``path``. Its request verification
refuses a bad signature or a timestamp more than five minutes old with 401 before any
listener runs, and Slack's retries (``X-Slack-Retry-Num``) are answered like first
deliveries — the inbox makes them harmless.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from core.tasks import TaskSet

_log = logging.getLogger(__name__)


class Receiver(Protocol):
    url: str | None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class SocketReceiver:
    def __init__(
        self, app: AsyncApp, app_token: str, watchdog_seconds: float, ping_interval: float = 5.0
    ) -> None:
        self.url: str | None = None
        self.handler = AsyncSocketModeHandler(app, app_token=app_token, ping_interval=ping_interval)
        self.client = self.handler.client
        self.client.message_listeners.append(self._heard)
        self.watchdog_seconds = watchdog_seconds
        self.replaced = 0
        """Connections the watchdog replaced (for logs and tests)."""
        self._last_heard = time.monotonic()
        self._tasks = TaskSet(_log)

    async def start(self) -> None:
        await self.handler.connect_async()  # type: ignore[no-untyped-call]
        self._last_heard = time.monotonic()
        self._tasks.spawn(self._watch(), name="slack-socket-watchdog")

    async def stop(self) -> None:
        await self._tasks.aclose()
        await self.handler.close_async()  # type: ignore[no-untyped-call]

    async def _heard(self, *_: Any) -> None:
        self._last_heard = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the connection last delivered a frame or answered a ping."""
        pong = self.client.last_ping_pong_time
        heard = self._last_heard
        if pong is not None:
            heard = max(heard, time.monotonic() - (time.time() - float(pong)))
        return time.monotonic() - heard

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watchdog_seconds / 4)
            try:
                await self.check()
            except Exception:
                _log.exception("slack: the Socket Mode watchdog could not reconnect")

    async def check(self) -> bool:
        """Replace the connection if it is closed or silent too long; True if replaced."""
        silent = self.silent_for()
        connected = await self.client.is_connected()
        if connected and silent < self.watchdog_seconds:
            return False
        why = f"silent for {silent:.0f}s" if connected else "not connected"
        _log.warning("slack: Socket Mode connection %s; opening a new one", why)
        await self.client.connect_to_new_endpoint(force=True)
        self._last_heard = time.monotonic()
        self.replaced += 1
        return True


class HttpReceiver:
    def __init__(self, app: AsyncApp, host: str, port: int, path: str) -> None:
        self.app, self.host, self.port, self.path = app, host, port, path
        self.url: str | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app.web_app(path=self.path), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}{self.path}"
        _log.info("slack: events at %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
