"""One MCP server, supervised: connected, listed, called with a deadline, restarted.

The SDK's :class:`mcp.Client` lives in a task of its own (its anyio scopes are entered and
left there); calls come from the turns' tasks. States, one at a time::

    starting ──► ready ──► unavailable ──(backoff)──► starting ...
        └──────────────────────┘ (did not start in startup_timeout)      ──► stopped

* **starting**: the transport opens (a stdio child starts in its sandbox), the client
  speaks the initialize handshake (``mode="legacy"``, which every server answers) and lists
  the tools — all within ``startup_timeout``.
* **ready**: calls go through. Each has a deadline (``timeout``): past it the call is
  abandoned, which sends MCP's ``notifications/cancelled``, and the model gets
  :class:`CallTimedOut`. The turn's token (``/stop``) cancels the call the same way. After a
  timeout the server is asked for its tools within ``startup_timeout`` (or ``timeout``, when
  shorter); one that does not answer is hung, and is restarted.
  ``notifications/tools/list_changed`` lists the tools again
  (:attr:`ServerConnection.tools` changes; nothing restarts).
* **unavailable**: the server exited, its stream broke, it hung or did not start. Its tools
  answer :class:`ServerUnavailable` at once; it is started again after a backoff
  (:class:`Backoff`: 1 s, doubling to 60 s; back to 1 s once a start succeeded).

Every change of state is logged once: a WARNING when the server becomes unavailable or
comes back, INFO when it is first ready. Nothing a server sends ever raises into a turn:
SDK errors (anyio exception groups included) become :class:`CallFailed` with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, Implementation

from core.cancellation import CancellationToken
from core.mcp.spec import ServerSpec
from core.mcp.transport import server_transport, watched
from core.tools.sandbox import Bubblewrap

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "unavailable", "stopped"]
Sleep = Callable[[float], Awaitable[None]]

LIST_PAGES = 100
"""Pages of ``tools/list`` read at most (a server whose cursor never ends is cut off)."""
STOP_SECONDS = 5.0
"""How long stopping one server may take (the SDK closes stdin, then kills)."""
CLIENT_INFO = Implementation(name="commonos-gateway", version="0.1.0")


class CallFailed(Exception):
    """A call did not come back with a result; the message is one readable line."""


class ServerUnavailable(CallFailed):
    """The server is not running (exited, hung, not started yet): the call was not made,
    or the server went away during it."""


class CallTimedOut(CallFailed):
    """The call passed its deadline; it was cancelled on the server."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Seconds before the ``attempt``-th start in a row that did not succeed (from 0)."""

    first: float = 1.0
    factor: float = 2.0
    most: float = 60.0

    def delay(self, attempt: int) -> float:
        return float(min(self.first * self.factor**attempt, self.most))


DEFAULT_BACKOFF = Backoff()


class ServerConnection:
    """A supervised connection to one server (see the module docstring)."""

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
        self._sandbox = sandbox
        self._backoff = backoff
        self._sleep = sleep
        self._clock = clock
        self.state: State = "stopped"
        self.reason = "not started"
        self.tools: tuple[types.Tool, ...] = ()
        self.restarts = 0
        self.calls = 0
        self.failures = 0
        self.since = clock()
        self._client: Client | None = None
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._restart = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[None]] = set()
        self._refreshing: asyncio.Future[None] | None = None
        self._ever_ready = False
        self.on_tools: Callable[[ServerConnection], None] | None = None
        """Called after the tool list changed (a refresh that found it different)."""

    @property
    def name(self) -> str:
        return self.spec.name

    # life -------------------------------------------------------------------------
    async def start(self) -> State:
        """Start supervising; return once the first start succeeded or failed."""
        if self._supervisor is None:
            self._stop.clear()
            self._supervisor = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        await self.wait_for(lambda: self.state in ("ready", "unavailable"))
        return self.state

    async def stop(self) -> None:
        """Stop the server (and the supervision); calls then answer unavailable."""
        self._stop.set()
        tasks = {t for t in (self._supervisor, *self._background) if t is not None}
        for task in self._background:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_SECONDS + 1)
        self._supervisor = None
        await self._set_state("stopped", "stopped")

    async def wait_for(self, ready: Callable[[], bool]) -> None:
        """Wait until ``ready()`` holds (checked at every change of state or tools)."""
        async with self._changed:
            await self._changed.wait_for(ready)

    # calls ------------------------------------------------------------------------
    async def reach(self, session_key: str, session_id: str) -> ServerConnection:
        """The connection every session's calls go to: this one (``scope = "process"``)."""
        return self

    async def call(
        self, tool: str, arguments: dict[str, Any], token: CancellationToken
    ) -> types.CallToolResult:
        """Call ``tool``; raises :class:`CallFailed` (never the SDK's errors) or
        :class:`~core.cancellation.Cancelled` when ``token`` is."""
        client = self._client
        if client is None or self.state != "ready":
            raise ServerUnavailable(self._unavailable())
        self.calls += 1
        work = client.call_tool(tool, arguments)
        try:
            result = await token.guard(CancellationToken.time_boxed(work, self.spec.timeout))
        except TimeoutError:
            self.failures += 1
            self._in_background(self._check_alive(client))
            raise CallTimedOut(
                f"MCP server {self.name}: {tool} timed out after {self.spec.timeout:g} s "
                "(cancelled)"
            ) from None
        except MCPError as error:
            self.failures += 1
            if error.code == CONNECTION_CLOSED:
                raise ServerUnavailable(
                    f"MCP server {self.name} went away during the call; it is being restarted"
                ) from None
            raise CallFailed(f"MCP server {self.name}: error {error.code}: {error}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.failures += 1
            raise ServerUnavailable(self._unavailable()) from None
        except Exception as error:  # the SDK's own (validation, exception groups)
            self.failures += 1
            raise CallFailed(f"MCP server {self.name}: {_one_line(error)}") from None
        await self._refreshed()
        return result

    async def _refreshed(self) -> None:
        """A tool list the server said changed during the call is read before its result
        is handed on (the model's next request then offers the new tools)."""
        refreshing = self._refreshing
        if refreshing is not None and not refreshing.done():
            await asyncio.wait({refreshing}, timeout=self.spec.startup_timeout)

    def _unavailable(self) -> str:
        return f"MCP server {self.name} is unavailable ({self.reason}); try again later"

    # supervision ------------------------------------------------------------------
    async def _supervise(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            started = await self._run_once()
            if self._stop.is_set():
                return
            attempt = 0 if started else attempt + 1
            await self._pause(self._backoff.delay(attempt))
            self.restarts += 1

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` unless stopped first."""
        sleeping = asyncio.ensure_future(self._sleep(seconds))
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (sleeping, stopping):
            task.cancel()
        await asyncio.wait({sleeping, stopping})

    async def _run_once(self) -> bool:
        """One life of the server: start, serve until it ends; whether it started."""
        await self._set_state("starting", "starting")
        ended, ready = anyio.Event(), asyncio.Event()
        self._restart.clear()
        session = asyncio.create_task(self._session(ended, ready), name=f"mcp:{self.name}:session")
        reason = await self._started(session, ready)
        if reason is None:
            await self._set_state("ready", "ready")
            reason = await self._ended(session)
        await self._close(session)
        self._client = None
        if not self._stop.is_set():
            await self._set_state("unavailable", reason)
        return ready.is_set()

    async def _started(self, session: asyncio.Task[None], ready: asyncio.Event) -> str | None:
        """None once ``ready``; else why the start failed."""
        waiting = asyncio.ensure_future(ready.wait())
        stopping = asyncio.ensure_future(self._stop.wait())
        limit = self.spec.startup_timeout
        await asyncio.wait(
            {session, waiting, stopping}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
        )
        waiting.cancel()
        stopping.cancel()
        if ready.is_set():
            return None
        if session.done():
            return f"could not start: {_task_error(session)}"
        return "stopped" if self._stop.is_set() else f"did not start within {limit:g} s"

    async def _ended(self, session: asyncio.Task[None]) -> str:
        """Wait while the server serves; why it stopped serving."""
        restart = asyncio.ensure_future(self._restart.wait())
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({session, restart, stopping}, return_when=asyncio.FIRST_COMPLETED)
        restart.cancel()
        stopping.cancel()
        if self._stop.is_set():
            return "stopped"
        if self._restart.is_set():
            return self._restart_reason
        return f"the server exited or closed the connection{_task_note(session)}"

    async def _close(self, session: asyncio.Task[None]) -> None:
        if not session.done():
            session.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(session), STOP_SECONDS)

    async def _session(self, ended: anyio.Event, ready: asyncio.Event) -> None:
        transport = watched(server_transport(self.spec.transport, self._sandbox), ended)
        client = Client(
            transport, mode="legacy", cache=None, client_info=CLIENT_INFO,
            message_handler=self._on_message,
        )  # fmt: skip
        async with client:
            self.tools = await self._list(client)
            self._client = client
            ready.set()
            await ended.wait()

    async def _list(self, client: Client) -> tuple[types.Tool, ...]:
        found: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            found += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(found)

    async def _on_message(self, message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            client = self._client
            if client is not None:
                self._refreshing = self._in_background(self._refresh(client))

    async def _refresh(self, client: Client) -> None:
        try:
            tools = await CancellationToken.time_boxed(
                self._list(client), self.spec.startup_timeout
            )
        except Exception as error:
            log.warning("MCP server %s: its tools could not be listed again: %s",
                        self.name, _one_line(error))  # fmt: skip
            return
        if tools != self.tools:
            self.tools = tools
            log.info("MCP server %s: tools changed (%d now)", self.name, len(tools))
            if self.on_tools is not None:
                self.on_tools(self)
            await self._notify()

    async def _check_alive(self, client: Client) -> None:
        """After a timeout: a server that cannot list its tools in time (the shorter of
        the start's and a call's deadline) is hung."""
        try:
            await CancellationToken.time_boxed(
                client.list_tools(cache_mode="bypass"),
                min(self.spec.startup_timeout, self.spec.timeout),
            )
        except Exception as error:
            if client is self._client and self.spec.kind == "stdio":
                self._restart_reason = f"hung (did not answer: {_one_line(error)})"
                self._restart.set()

    _restart_reason = "restarted"

    def _in_background(self, work: Awaitable[None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _set_state(self, state: State, reason: str) -> None:
        if state == self.state and reason == self.reason:
            return
        self.state, self.reason, self.since = state, reason, self._clock()
        if state == "unavailable":
            log.warning("MCP server %s is unavailable: %s", self.name, reason)
        elif state == "ready" and self._ever_ready:
            log.warning("MCP server %s is back (%d tools)", self.name, len(self.tools))
        elif state == "ready":
            log.info("MCP server %s is ready (%d tools)", self.name, len(self.tools))
        self._ever_ready = self._ever_ready or state == "ready"
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def _task_error(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    return "the server closed the connection" if error is None else _one_line(error)


def _task_note(task: asyncio.Task[None]) -> str:
    if not task.done() or task.cancelled() or task.exception() is None:
        return ""
    return f": {_one_line(task.exception())}"


def _one_line(error: BaseException | None) -> str:
    """An error as one line; an exception group by its first leaf."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if error is None:
        return "unknown error"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
