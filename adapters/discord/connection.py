"""The Discord gateway connection, kept alive by :class:`adapters.health.Supervisor`.

What ends how (docs/architecture.md, "Connections and health")::

    RECONNECT (op 7), INVALID_SESSION (op 9), a resumable close   reconnected at once by
      (4000-4003, 4005, 4007-4009, 1006, a 1000 we did not ask)    :meth:`GatewayLink.connect`
      after the socket was READY or RESUMED                        (RESUME when it can)
    the same before READY/RESUMED, a refused or failed connect,    raised: transient, the
      a network error, a frame discord.py could not read at all    supervisor backs off, then
                                                                   RESUMEs the last session
    close 4004, 4010, 4011, 4012, 4013, 4014, a 401 on login       fatal (:func:`fatal_cause`):
                                                                   one ERROR, health down

The loop is discord.py's own ``Client.connect`` loop (``DiscordWebSocket.from_client`` then
``poll_event`` until ``ReconnectWebSocket``), less its two parts that would hide a failure:
its reconnect backoff (real sleeps, the health never told) and its ``close()`` of the whole
client on an error (the client could then only be rebuilt, and the session not resumed).

A payload discord.py cannot parse (:func:`guard_parsers`) is handed to ``poison`` and the
connection goes on; READY is the exception, without it the socket is useless, so it ends
the socket (transient).

:class:`GatewayClient` is the client itself: it knows when READY came and every guild it
listed arrived, spaces IDENTIFYs on the adapter's sleep and hands messages on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import discord
from discord.gateway import DiscordWebSocket, ReconnectWebSocket

from adapters.health import Backoff, Clock, HealthCell, Sleep

_log = logging.getLogger(__name__)

IDENTIFY_SPACING = 5.0
"""Seconds between two IDENTIFYs of one shard (Discord's limit, as discord.py waits it)."""
CONNECT_TIMEOUT = 60.0
"""Seconds one websocket may take from the upgrade to IDENTIFY/RESUME sent (discord.py's)."""
TOKEN_FIX = "reset it in the Developer Portal (Bot → Reset Token) and set [discord] token"
FATAL_CLOSES: dict[int, str] = {
    4004: f"the bot token was rejected (close 4004): {TOKEN_FIX}",
    4010: "Discord refused the shard (close 4010 Invalid shard): run one connection, unsharded",
    4011: "Discord requires sharding (close 4011): the bot is in too many guilds for one "
    "connection",
    4012: "Discord refused the gateway version (close 4012): upgrade discord.py",
    4013: "Discord refused the intents (close 4013 Invalid intents): upgrade discord.py",
    4014: "Discord refused the Message Content intent (close 4014): enable it in the "
    "Developer Portal (Bot → Privileged Gateway Intents) or set message_content = false "
    "in [discord]",
}
"""The close codes no reconnect can fix, with the fix (discord.py does not resume them)."""
MUST_PARSE = frozenset({"READY"})
"""Events without which the socket is useless: their parse failure ends the socket
(:class:`UnreadableReady`)."""
ESTABLISHED = frozenset({"READY", "RESUMED"})

Poison = Callable[[str, Any, Exception], None]
"""``(event, data, error)``: one dispatched payload discord.py could not parse."""


@dataclass(frozen=True, slots=True)
class Timing:
    """What the gateway's reconnects wait on; tests give a test clock and sleep."""

    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep
    """Also the wait before an IDENTIFY that is not the run's first (Discord allows one
    IDENTIFY per 5 s; discord.py's ``before_identify_hook`` sleeps that for real)."""
    backoff: Callable[[], Backoff] = Backoff


class ClosedEarly(Exception):
    """The gateway closed a socket before READY or RESUMED (transient, backed off)."""


class UnreadableReady(Exception):
    """discord.py could not parse READY: the socket ends, the next one IDENTIFYs afresh."""


def fatal_cause(exc: BaseException) -> str | None:
    """The cause and the fix when ``exc`` is one no reconnect can cure; None otherwise."""
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return FATAL_CLOSES[4014]
    if isinstance(exc, discord.ConnectionClosed):
        return FATAL_CLOSES.get(exc.code)
    if isinstance(exc, discord.LoginFailure):
        return f"the bot token was rejected (HTTP 401): {TOKEN_FIX}"
    return None


class GatewayLink:
    """One client's gateway connection: ``connect`` is the supervisor's ``connect()``.

    The session (id, sequence, resume URL) outlives a failed socket, so the next
    ``connect`` RESUMEs it and Discord replays what was missed."""

    def __init__(self, client: discord.Client, cell: HealthCell) -> None:
        self._client = client
        self._cell = cell
        self._params: dict[str, Any] = {"initial": True, "shard_id": client.shard_id}
        self._established = False
        self.sockets = 0
        """Websockets opened during this run (the first one included)."""

    def dispatched(self, event: str) -> None:
        """Called by the guarded parsers after each event they parsed."""
        if event in ESTABLISHED:
            self._established = True
            self._cell.up()

    async def connect(self) -> None:
        """Connect, and reconnect at once after each resumable end of a socket that was
        READY; raise on anything else (the supervisor decides). Returns when the client
        was closed (the adapter stopping)."""
        client = self._client
        while not client.is_closed():
            self._established = False
            ws: DiscordWebSocket | None = None
            try:
                ws = await self._open()
                while True:
                    await ws.poll_event()
            except ReconnectWebSocket as exc:
                client.dispatch("disconnect")
                self._remember(ws or client.ws, exc.resume)
                await _discard(ws)
                if not self._established:
                    raise ClosedEarly("the gateway ended the connection before READY") from None
            except Exception as exc:
                client.dispatch("disconnect")
                self._remember(ws or client.ws, resume=not isinstance(exc, UnreadableReady))
                await _discard(ws)
                raise

    async def _open(self) -> DiscordWebSocket:
        opening = DiscordWebSocket.from_client(self._client, **self._params)
        self.sockets += 1
        ws = await asyncio.wait_for(opening, timeout=CONNECT_TIMEOUT)
        self._client.ws = ws
        self._params["initial"] = False
        return ws

    def _remember(self, ws: DiscordWebSocket | None, resume: bool) -> None:
        """Where the next socket goes: the session to RESUME, or a fresh IDENTIFY."""
        session = getattr(ws, "session_id", None) if resume else None
        if session is None:
            self._params.update(resume=False, session=None, sequence=None, gateway=None)
            return
        assert ws is not None
        self._params.update(resume=True, session=session, sequence=ws.sequence,
                            gateway=ws.gateway)  # fmt: skip


DISCARD_SECONDS = 2.0


async def _discard(ws: DiscordWebSocket | None) -> None:
    """Close a socket this link is done with, and stop its heartbeat thread: discord.py
    stops it only on a close it saw, so a socket left by an error (an unreadable READY)
    would keep a ``KeepAliveHandler`` thread beating into a socket, and a loop, that are
    gone. Code 4000 keeps the session resumable."""
    if ws is None:
        return
    try:
        await asyncio.wait_for(ws.close(code=4000), DISCARD_SECONDS)
    except Exception as exc:  # the socket is already gone: nothing left to close
        _log.debug("discord: closing an ended socket: %s", exc)


def guard_parsers(
    client: discord.Client, poison: Poison, dispatched: Callable[[str], None]
) -> None:
    """Make every gateway parser of ``client`` unable to end the connection.

    discord.py's ``DiscordWebSocket.received_message`` calls
    ``ConnectionState.parsers[event](data)`` for each DISPATCH, and an exception there
    leaves ``poll_event`` and the connection. ``parsers`` is one dict, built once in
    ``ConnectionState.__init__`` and shared by reference with every socket
    (``from_client``), so replacing its values once, before the first connect, covers
    every socket of this client. It is safe: a parser is a synchronous ``(data) -> None``
    that updates the cache and dispatches; one that fails has done at most part of that
    for one event, as if Discord had not sent it. Dispatch-listener futures
    (``wait_for``) are resolved after the parser, unchanged."""
    parsers = client._connection.parsers
    for event, parse in list(parsers.items()):
        parsers[event] = _guarded(event, parse, poison, dispatched)


def _guarded(
    event: str, parse: Callable[[Any], None], poison: Poison, dispatched: Callable[[str], None]
) -> Callable[[Any], None]:
    def parse_or_quarantine(data: Any) -> None:
        try:
            _check_before_parse(event, data)
            parse(data)
        except Exception as exc:
            if event in MUST_PARSE:
                raise UnreadableReady(parse_error(event, exc)) from exc
            poison(event, data, exc)
            return
        dispatched(event)

    return parse_or_quarantine


COMPONENT_INTERACTION = 3


def _check_before_parse(event: str, data: Any) -> None:
    """Refuse what discord.py would parse but then trip over in a task of its own, where no
    guard can catch it: a component interaction (a button press) whose message has no
    ``components`` list makes ``View.from_message`` raise inside discord.py's dynamic-item
    task. Discord always sends the pressed message's components."""
    if event != "INTERACTION_CREATE" or not isinstance(data, dict):
        return
    if data.get("type") != COMPONENT_INTERACTION or "message" not in data:
        return
    message = data["message"]
    if not isinstance(message, dict) or not isinstance(message.get("components"), list):
        raise ValueError("a button press whose message carries no components list")


def dead_letter_id(event: str, data: Any) -> str:
    """``EVENT:<snowflake>`` when the payload has a usable id, else ``EVENT:<digest>``."""
    ident = data.get("id") if isinstance(data, dict) else None
    if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident).isdigit():
        return f"{event}:{ident}"
    digest = hashlib.sha256(raw_json(data).encode()).hexdigest()[:16]
    return f"{event}:unreadable-{digest}"


def raw_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=str)


def parse_error(event: str, exc: Exception) -> str:
    return f"discord.py could not read this {event}: {type(exc).__name__}: {exc}"


class GatewayOwner(Protocol):
    """What :class:`GatewayClient` hands its events to (the adapter)."""

    timing: Timing

    async def on_message(self, message: discord.Message) -> None: ...

    async def on_press(self, interaction: discord.Interaction, custom_id: str) -> None: ...


class GatewayClient(discord.Client):
    """discord.py's client, its events handed to the adapter that owns it."""

    def __init__(self, adapter: GatewayOwner, **options: Any) -> None:
        super().__init__(**options)
        self.press_handler = adapter
        self._adapter = adapter
        self.receiving = asyncio.Event()
        """Set once READY came and every guild it listed has arrived (GUILD_CREATE)."""

    def _note_guilds(self) -> None:
        if self.user is not None and not any(guild.unavailable for guild in self.guilds):
            self.receiving.set()

    async def on_connect(self) -> None:
        self._note_guilds()

    async def on_guild_available(self, guild: discord.Guild) -> None:
        self._note_guilds()

    async def on_ready(self) -> None:
        # discord.py's own READY: after guild_ready_timeout, even if a guild never came
        self.receiving.set()

    async def on_message(self, message: discord.Message) -> None:
        await self._adapter.on_message(message)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Discord's one IDENTIFY per 5 s, waited on the adapter's (injected) sleep."""
        if not initial:
            await self._adapter.timing.sleep(IDENTIFY_SPACING)
