"""Servers started per session (``scope = "session"``), for servers that keep per-session
state (a browser, a scratch database, a login).

:class:`SessionServers` stands for one such configured server. Its tools are listed once,
by a **probe** start when the gateway starts (the probe is stopped as soon as it listed
them; one that does not start is retried with backoff until it does); a later tool-list
change of any instance replaces the list. A session's **instance** — its own
:class:`~core.mcp.connection.ServerConnection`, its own process — is started on the
session's first call of one of the server's tools and reused by the session's later calls.
It is keyed by the session key and bound to the session's id, so one conversation never
reaches another's server, and it is stopped when:

* the session ends (``/new``: :meth:`SessionServers.end`; a call from a newer session of
  the same key also stops the old instance first);
* it was not called for ``session_idle`` seconds (a sweep every half of that, and before a
  start that would pass the limit);
* the gateway stops (:meth:`SessionServers.stop`).

At most ``max_sessions`` instances run at once; past that a call answers one readable line
(:class:`SessionsFull`) and starts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mcp_types as types

from core.mcp.connection import (
    DEFAULT_BACKOFF,
    Backoff,
    CallFailed,
    ServerConnection,
    ServerUnavailable,
    Sleep,
    State,
)
from core.mcp.spec import ServerSpec
from core.tools.sandbox import Bubblewrap

log = logging.getLogger(__name__)


class SessionsFull(CallFailed):
    """Every per-session instance the server may have is running."""


@dataclass(slots=True)
class Instance:
    """One session's server."""

    session_id: str
    connection: ServerConnection
    used: float


class SessionServers:
    """One ``scope = "session"`` server: its tools, and an instance per session."""

    def __init__(
        self,
        spec: ServerSpec,
        sandbox: Bubblewrap | str | None = None,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self._sandbox, self._backoff, self._sleep, self._clock = sandbox, backoff, sleep, clock
        self.probe = self._connection()
        self.tools: tuple[types.Tool, ...] = ()
        self.live: dict[str, Instance] = {}
        """The running instances, by session key."""
        self._starting: dict[str, asyncio.Future[Instance]] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self.started = 0
        self.ended_calls = 0
        self.ended_failures = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def state(self) -> State:
        """``ready`` once the tools were listed; else the probe's state."""
        return "ready" if self.tools else self.probe.state

    @property
    def reason(self) -> str:
        if not self.tools:
            return self.probe.reason
        return f"per session: {len(self.live)} of {self.spec.max_sessions} running"

    # life -------------------------------------------------------------------------
    async def start(self) -> State:
        """Start the probe; once it listed the tools it is stopped again (at once when
        it started; after its first successful restart when it did not)."""
        self.probe.on_tools = self._listed
        state = await self.probe.start()
        self._background(self._sweeping())
        if state == "ready":
            await self._retire_probe()
        else:
            self._background(self._retire_probe())
        return self.state

    async def _retire_probe(self) -> None:
        await self.probe.wait_for(lambda: self.probe.state == "ready")
        self.tools = self.probe.tools
        await self.probe.stop()

    async def stop(self) -> None:
        """Stop the probe and every instance."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.probe.stop()
        await asyncio.gather(*(self.end(key) for key in list(self.live)))

    async def end(self, session_key: str) -> None:
        """The session of ``session_key`` ended: stop its instance (if any)."""
        instance = self.live.pop(session_key, None)
        if instance is not None:
            await self._stopped(instance, "its session ended")

    async def sweep(self) -> int:
        """Stop the instances idle for ``session_idle`` seconds; how many."""
        now = self._clock()
        idle = [k for k, i in self.live.items() if now - i.used >= self.spec.session_idle]
        for key in idle:
            instance = self.live.pop(key)
            await self._stopped(instance, f"idle for {self.spec.session_idle:g} s")
        return len(idle)

    # calls ------------------------------------------------------------------------
    async def reach(self, session_key: str, session_id: str) -> ServerConnection:
        """The session's instance, started on its first call (see the module docstring).
        Raises :class:`~core.mcp.connection.CallFailed` when it cannot be had."""
        instance = self.live.get(session_key)
        if instance is not None and instance.session_id != session_id:
            await self.end(session_key)
            instance = None
        if instance is None:
            instance = await self._instance(session_key, session_id)
        instance.used = self._clock()
        return instance.connection

    async def _instance(self, session_key: str, session_id: str) -> Instance:
        """Start the instance once, however many calls wait for it."""
        pending = self._starting.get(session_key)
        if pending is None:
            pending = asyncio.ensure_future(self._begin(session_key, session_id))
            self._starting[session_key] = pending
            pending.add_done_callback(lambda _: self._starting.pop(session_key, None))
        return await asyncio.shield(pending)

    async def _begin(self, session_key: str, session_id: str) -> Instance:
        if len(self.live) >= self.spec.max_sessions:
            await self.sweep()
        if len(self.live) >= self.spec.max_sessions:
            raise SessionsFull(
                f"MCP server {self.name}: all {self.spec.max_sessions} per-session servers "
                "are in use (max_sessions); try again later"
            )
        connection = self._connection()
        connection.on_tools = self._listed
        state = await connection.start()
        if state != "ready":
            reason = connection.reason
            await connection.stop()
            raise ServerUnavailable(
                f"MCP server {self.name} could not start for this session ({reason})"
            )
        self.started += 1
        instance = Instance(session_id, connection, self._clock())
        self.live[session_key] = instance
        log.info("MCP server %s: started for a session (%d running)", self.name, len(self.live))
        return instance

    # inside -----------------------------------------------------------------------
    def _connection(self) -> ServerConnection:
        return ServerConnection(
            self.spec, self._sandbox, backoff=self._backoff, sleep=self._sleep, clock=self._clock
        )

    def _listed(self, connection: ServerConnection) -> None:
        self.tools = connection.tools

    async def _stopped(self, instance: Instance, why: str) -> None:
        connection = instance.connection
        await connection.stop()
        self.ended_calls += connection.calls
        self.ended_failures += connection.failures
        log.info("MCP server %s: a session's server stopped (%s)", self.name, why)

    async def _sweeping(self) -> None:
        while True:
            await self._sleep(self.spec.session_idle / 2)
            with contextlib.suppress(Exception):
                await self.sweep()

    def _background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
