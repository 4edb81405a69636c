"""What the three platform simulators share: values, the server lifecycle, waiting, faults.

Each simulator is an aiohttp server on ``127.0.0.1:0`` that runs in the test's event loop and
keeps the platform's state (chats, messages with their edit history, pending events) in plain
Python objects. Tests act as the *user* through ``user_says`` / ``press_button`` and assert on
the conversation (``messages`` / ``bot_messages``), not on request mocks. ``calls`` keeps every
API request for protocol assertions (order, pacing).

Waiting is event-driven: every state change notifies one ``asyncio.Condition``;
``wait_for(predicate, timeout)`` re-checks the predicate on each change and returns its first
truthy value, or raises ``TimeoutError`` naming what was awaited. Only the simulator's own
state wakes it: to wait for something on the bot's side (a handler ran), use an
``asyncio.Event``/``Queue`` the handler sets.

A bot message is visible in ``messages()`` as soon as the simulator stores it, which is a
moment *before* the library's send call returns to the bot. A library that registers state
after the send returns (discord.py ``View``) needs the test to wait for the bot's side too
before pressing a button.

Held answers: ``hold = hold_next(method, matching=None)`` lets the next call to ``method``
(whose parameters ``matching`` accepts) be done by the platform (the message exists) and
then keeps its HTTP answer until ``hold.release()``;
``await hold.reached.wait()`` waits for that moment — a reply "in flight" for a crash test.

Faults: ``fail_next(method, SimError.rate_limit(0.2) | .forbidden() | .not_found() |
.server_error(502) | .platform(code, status))`` answers the next call(s) to ``method`` with
the platform's own error shape. A request the simulator cannot handle (a simulator bug) is
answered with a clear 400 and kept in ``errors``; the fixtures fail the test if any occurred.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from aiohttp import web

_log = logging.getLogger(__name__)

T = TypeVar("T")
Json = dict[str, Any]
FaultKind = Literal["rate_limit", "forbidden", "not_found", "server_error", "platform"]


@dataclass(frozen=True, slots=True)
class SimButton:
    """A button as the user sees it: its label and the payload a press sends back."""

    label: str
    data: str | None = None
    url: str | None = None


@dataclass(slots=True)
class SimMessage:
    """One message in a chat, normalised across platforms.

    ``raw`` is the platform's current JSON for it; ``history`` holds the earlier versions
    (oldest first), one per accepted edit. ``event_id`` is the update/event id that delivered a
    *user* message to the bot (Telegram ``update_id``, Slack ``event_id``), else ``None``.
    """

    platform: str
    chat: str
    id: str
    author: str
    from_bot: bool
    text: str
    buttons: list[SimButton] = field(default_factory=list)
    raw: Json = field(default_factory=dict)
    history: list[Json] = field(default_factory=list)
    deleted: bool = False
    thread: str | None = None
    event_id: str | None = None

    def button(self, label: str) -> SimButton:
        """The button labelled ``label``; ``KeyError`` if the message has none."""
        for b in self.buttons:
            if b.label == label:
                return b
        raise KeyError(f"no button {label!r} on message {self.id}: {self.buttons}")


@dataclass(slots=True)
class Call:
    """One API request the simulator received.

    ``at`` is the sim's ``clock()`` on arrival; ``status`` the HTTP status answered (``None``
    while the request is still being handled, e.g. a long poll).
    """

    method: str
    params: Json
    at: float
    http_method: str = "POST"
    status: int | None = None
    arrived: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` on arrival, whatever ``clock`` the sim reads (real time)."""


@dataclass(frozen=True, slots=True)
class SimError:
    """A fault to inject with ``fail_next``; each simulator renders it in its own wire shape.

    ``code`` is the platform's error text or code (Telegram description, Discord JSON code,
    Slack ``error``) and overrides the default for the kind.
    """

    kind: FaultKind
    status: int = 400
    code: str | int | None = None
    retry_after: float = 0.2

    @classmethod
    def rate_limit(cls, retry_after: float = 0.2) -> SimError:
        return cls("rate_limit", 429, retry_after=retry_after)

    @classmethod
    def forbidden(cls, code: str | int | None = None) -> SimError:
        return cls("forbidden", 403, code)

    @classmethod
    def not_found(cls, code: str | int | None = None) -> SimError:
        return cls("not_found", 404, code)

    @classmethod
    def server_error(cls, status: int = 500) -> SimError:
        return cls("server_error", status)

    @classmethod
    def platform(cls, code: str | int, status: int = 400) -> SimError:
        """A platform-specific error, e.g. ``SimError.platform("Bad Request: chat not found")``."""
        return cls("platform", status, code)


@dataclass(slots=True)
class Hold:
    """The answer to one call, kept back (see ``SimServer.hold_next``)."""

    method: str
    matching: Callable[[Json], bool] | None = None
    """Which call's answer is held (by its parameters); None: the next call's."""
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the platform did the call and its answer is held."""
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


class SimServer:
    """Lifecycle, change notification, call log and fault queue of one simulator."""

    platform = "sim"

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.errors: list[Exception] = []
        self.url = ""
        self.port = 0
        self._changed = asyncio.Condition()
        self._faults: dict[str, list[SimError]] = {}
        self._holds: dict[str, list[Hold]] = {}
        self._every_hold: list[Hold] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)
        self.closing = False
        self.clock: Callable[[], float] = time.monotonic
        """What ``Call.at`` (and the Telegram sim's flood windows) read: a test may give the
        sim the gateway's test clock so both measure the same time."""

    # lifecycle ------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        """Add the platform's routes to ``app`` (overridden by each simulator)."""

    async def start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self.closing = True
        for hold in self._every_hold:
            hold.release()
        await self.changed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a tracked task: kept until done, cancelled on stop, failure logged."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.platform}-sim:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s failed", task.get_name(), exc_info=task.exception())

    # waiting ---------------------------------------------------------------------------------
    async def changed(self) -> None:
        """Wake every ``wait_for``: call after each state change."""
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float = 5.0) -> T:
        """Return the first truthy ``predicate()``, re-checked on every state change."""
        result: list[T] = []

        def check() -> bool:
            value = predicate()
            if value:
                result.append(value)
            return bool(value)

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(check)
        except TimeoutError:
            msg = f"{self.platform} sim: not true within {timeout}s: {predicate}"
            raise TimeoutError(msg) from None
        return result[0]

    # calls and faults ------------------------------------------------------------------------
    def record(self, method: str, params: Json, http_method: str = "POST") -> Call:
        call = Call(method, params, self.clock(), http_method)
        self.calls.append(call)
        return call

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def fail_next(self, method: str, error: SimError, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``method`` with ``error`` instead."""
        self._faults.setdefault(method, []).extend([error] * times)

    def take_fault(self, method: str) -> SimError | None:
        queue = self._faults.get(method)
        return queue.pop(0) if queue else None

    def hold_next(self, method: str, matching: Callable[[Json], bool] | None = None) -> Hold:
        """Do the next call to ``method`` (whose parameters match), then hold its answer
        until released."""
        hold = Hold(method, matching)
        self._holds.setdefault(method, []).append(hold)
        self._every_hold.append(hold)
        return hold

    async def held(self, method: str, params: Any) -> None:
        """Called by a handler once the call is done: waits while a hold keeps the answer
        (released on ``stop`` too)."""
        queue = self._holds.get(method, [])
        hold = next((h for h in queue if h.matching is None or h.matching(params)), None)
        if hold is None:
            return
        queue.remove(hold)
        hold.reached.set()
        await self.changed()
        await hold.released.wait()

    def internal_error(self, exc: Exception) -> None:
        """Keep and log a simulator bug; the request gets a clear 400 instead of a retried 500."""
        self.errors.append(exc)
        _log.error("%s simulator bug", self.platform, exc_info=exc)

    def next_id(self) -> int:
        return next(self._ids)
