"""Server-Sent Events over ``aiohttp.web.StreamResponse``.

A frame is ``id:`` (when the event has one — the browser sends the last it saw back as
``Last-Event-ID`` when it reconnects), ``event:`` and one ``data:`` line of JSON. A comment
line goes out every ``HEARTBEAT`` seconds so proxies and the browser keep an idle stream
open. Writing to a stream whose client left raises ``ConnectionResetError`` — the caller's
loop ends there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

HEARTBEAT = 15.0
RETRY_MS = 1000
"""How soon the browser reconnects after the stream drops."""


def frame(kind: str, data: Any, event_id: str | None = None) -> bytes:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {kind}", "data: " + json.dumps(data, separators=(",", ":"))]
    return ("\n".join(lines) + "\n\n").encode()


async def open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    await response.write(f"retry: {RETRY_MS}\n\n".encode())
    return response


async def with_heartbeats(
    queue: asyncio.Queue[Any], closing: asyncio.Event, heartbeat: float = HEARTBEAT
) -> AsyncIterator[Any]:
    """Items of ``queue`` as they come; ``None`` after ``heartbeat`` seconds of silence;
    ends when ``closing`` is set (the server is stopping)."""
    while not closing.is_set():
        getting = asyncio.ensure_future(queue.get())
        stopping = asyncio.ensure_future(closing.wait())
        try:
            done, _ = await asyncio.wait(
                {getting, stopping}, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopping.cancel()
            if not getting.done():
                getting.cancel()
        if getting in done and not getting.cancelled():
            yield getting.result()
        elif not done:
            yield None


HEARTBEAT_FRAME = b": keep-alive\n\n"
