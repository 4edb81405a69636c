"""The Discord gateway websocket of :class:`DiscordSim`: sessions, intents, resume.

Protocol (what discord.py does against it)::

    server HELLO(op 10) -> client HEARTBEAT(op 1) -> server ACK(op 11)
    client IDENTIFY(op 2) -> server READY (s=1) + GUILD_CREATE per guild
    client RESUME(op 6, session_id, seq) -> missed events replayed + RESUMED, or
                                            INVALID_SESSION(op 9, false) when unknown
    server RECONNECT(op 7) / INVALID_SESSION(op 9) on ``drop_connection``
    server HEARTBEAT(op 1) -> client HEARTBEAT(op 1): :meth:`Gateway.barrier`, proof that the
                              client has read every frame sent before it

Faults: ``close(code)`` closes every live socket with ``code``; ``refuse_connects`` answers
that many upgrade requests with HTTP 503; ``close_after_hello`` holds close codes, one per
next connection, sent right after HELLO; ``unreadable_ready`` READYs go without their
``user``; ``send_raw(event, data)`` dispatches any JSON as ``data`` (malformed payloads
included).

Payloads are zlib-stream compressed in binary frames when the client asks for
``compress=zlib-stream`` (one compressor per connection, flushed with Z_SYNC_FLUSH), else sent
as text frames. Close codes: 4004 bad token, 4014 disallowed (privileged, not enabled) intent.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from tests.platform_sim.discord_sim import DiscordSim

Json = dict[str, Any]
GUILDS, GUILD_MEMBERS, GUILD_MESSAGES, DIRECT_MESSAGES = 1 << 0, 1 << 1, 1 << 9, 1 << 12
MESSAGE_CONTENT, GUILD_PRESENCES = 1 << 15, 1 << 8
PRIVILEGED = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT
CLOSE_REASONS = {4000: b"Unknown error.", 4004: b"Authentication failed.",
                 4013: b"Invalid intent(s).", 4014: b"Disallowed intent(s)."}  # fmt: skip


@dataclass(slots=True)
class GatewaySession:
    """An identified session: survives reconnects while it can be resumed."""

    id: str
    intents: int
    bot: Any = None
    """The bot's simulator view (:meth:`DiscordSim.add_bot`) this session identified as."""
    seq: int = 0
    events: list[Json] = field(default_factory=list)  # every dispatch, for resume replay


@dataclass(slots=True)
class Connection:
    ws: web.WebSocketResponse
    compressor: Any | None
    session: GatewaySession | None = None

    async def send(self, payload: Json) -> None:
        data = json.dumps(payload).encode()
        if self.compressor is None:
            await self.ws.send_str(data.decode())
        else:
            await self.ws.send_bytes(self.compressor.compress(data) + self.compressor.flush(
                zlib.Z_SYNC_FLUSH))  # fmt: skip


class Gateway:
    """Accepts gateway websockets and dispatches events to identified sessions."""

    def __init__(self, sim: DiscordSim, heartbeat_interval_ms: int = 41250) -> None:
        self.sim = sim
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.sessions: dict[str, GatewaySession] = {}
        self.connections: list[Connection] = []
        self.identify: Json | None = None
        self.identifies: list[Json] = []
        self.accepted = 0
        """Websockets accepted (each reconnect is one more)."""
        self.refuse_connects = 0
        self.close_after_hello: list[int] = []
        self.unreadable_ready = 0
        """READYs still to send without their ``user`` (a payload discord.py cannot parse)."""
        self.resumes: list[Json] = []
        self.heartbeats = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.refuse_connects > 0:
            self.refuse_connects -= 1
            await self.sim.changed()
            return web.Response(status=503, text="upstream connect error")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.accepted += 1
        zlib_stream = request.query.get("compress") == "zlib-stream" and self.sim.zlib_stream
        conn = Connection(ws, zlib.compressobj() if zlib_stream else None)
        self.connections.append(conn)
        try:
            await conn.send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
            if self.close_after_hello:
                await ws.close(code=self.close_after_hello.pop(0), message=b"Closed early.")
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._receive(conn, json.loads(msg.data))
        finally:
            self.connections.remove(conn)
            await self.sim.changed()
        return ws

    async def _receive(self, conn: Connection, payload: Json) -> None:
        op, data = payload.get("op"), payload.get("d")
        if op == 1:
            self.heartbeats += 1
            await conn.send({"op": 11})
        elif op == 2:
            await self._identify(conn, data or {})
        elif op == 6:
            await self._resume(conn, data or {})
        elif op == 8:
            await self._members_chunk(conn, data or {})
        await self.sim.changed()

    async def _identify(self, conn: Connection, data: Json) -> None:
        self.identify = data
        self.identifies.append(data)
        view = self.sim.view_of(data.get("token"))
        if view is None:
            await conn.ws.close(code=4004, message=CLOSE_REASONS[4004])
            return
        intents = int(data.get("intents", 0))
        if intents & PRIVILEGED & ~view.privileged_intents:
            await conn.ws.close(code=4014, message=CLOSE_REASONS[4014])
            return
        session = GatewaySession(f"session-{self.sim.next_id()}", intents, view)
        self.sessions[session.id] = session
        conn.session = session
        ready = self._ready(session)
        if self.unreadable_ready > 0:
            self.unreadable_ready -= 1
            del ready["user"]
        await self._dispatch_to(conn, "READY", ready)
        for guild in self.sim.guilds.values():
            if intents & GUILDS:
                await self._dispatch_to(conn, "GUILD_CREATE", guild.to_json())

    def _ready(self, session: GatewaySession) -> Json:
        guilds = [{"id": g, "unavailable": True} for g in self.sim.guilds]
        view = session.bot or self.sim
        return {"v": 10, "user": view.bot.to_json(), "session_id": session.id,
                "resume_gateway_url": f"ws://127.0.0.1:{self.sim.port}/gateway",
                "guilds": guilds, "private_channels": [], "relationships": [],
                "application": {"id": view.app_id, "flags": 0}, "shard": [0, 1],
                "session_type": "normal"}  # fmt: skip

    async def _resume(self, conn: Connection, data: Json) -> None:
        self.resumes.append(data)
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != (session.bot or self.sim).token:
            await conn.send({"op": 9, "d": False})
            return
        conn.session = session
        seq = int(data.get("seq") or 0)
        for event in session.events:
            if event["s"] > seq:
                await conn.send(event)
        await self._dispatch_to(conn, "RESUMED", {})

    async def _members_chunk(self, conn: Connection, data: Json) -> None:
        guild = self.sim.guilds.get(str(data.get("guild_id")))
        if guild is not None:
            chunk = {"guild_id": guild.id, "members": [m for m in guild.to_json()["members"]],
                     "chunk_index": 0, "chunk_count": 1, "nonce": data.get("nonce")}  # fmt: skip
            await self._dispatch_to(conn, "GUILD_MEMBERS_CHUNK", chunk)

    async def _dispatch_to(self, conn: Connection, event: str, data: Json) -> None:
        session = conn.session
        assert session is not None
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(payload)
        await conn.send(payload)

    async def dispatch(self, event: str, data: Json, needs: int, *, content: bool = True) -> None:
        """Send ``event`` to every session whose intents include ``needs``.

        ``content=False`` blanks message content for sessions without MESSAGE_CONTENT.
        """
        for session in self.sessions.values():
            if needs and not session.intents & needs:
                continue
            payload_data = data
            if not content and not session.intents & MESSAGE_CONTENT:
                payload_data = {**data, "content": "", "embeds": [], "attachments": [],
                                "components": []}  # fmt: skip
            await self._send_session(session, event, payload_data)

    async def _send_session(self, session: GatewaySession, event: str, data: Json) -> None:
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(payload)
        for conn in self.connections:
            if conn.session is session and not conn.ws.closed:
                await conn.send(payload)

    def live(self) -> list[Connection]:
        return [c for c in self.connections if not c.ws.closed]

    async def drop(self, how: str, code: int = 4000) -> int:
        """``reconnect`` (op 7), ``invalid_session`` (op 9), or ``close`` (with ``code``)."""
        live = self.live()
        for conn in live:
            if how == "reconnect":
                await conn.send({"op": 7, "d": None})
            elif how == "invalid_session":
                if conn.session is not None:
                    self.sessions.pop(conn.session.id, None)
                await conn.send({"op": 9, "d": False})
            else:
                await conn.ws.close(code=code, message=CLOSE_REASONS.get(code, b"Closed."))
        return len(live)

    async def send_raw(self, event: str, data: Any) -> None:
        """Dispatch ``event`` with any JSON value as its ``d`` to every identified session."""
        for session in list(self.sessions.values()):
            await self._send_session(session, event, data)

    async def barrier(self) -> None:
        """Ask every live socket for a heartbeat and wait for the answers: the client has
        then read (and parsed) every frame sent before."""
        live = [c for c in self.live() if c.session is not None]
        target = self.heartbeats + len(live)
        for conn in live:
            await conn.send({"op": 1, "d": None})
        await self.sim.wait_for(lambda: self.heartbeats >= target)

    async def close_all(self) -> None:
        for conn in list(self.connections):
            await conn.ws.close(code=1001)
