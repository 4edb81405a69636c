"""``commonos run`` killed with SIGKILL while an answer is being streamed, then run again on
the same home (store file included): the stream-crash tests of each platform and
``python -m bench kill_streams``.

The scripted model streams the answer's first words, then stalls (the turn is mid-stream);
once the simulator shows the partial message and the store records it (the moment a kill
is meant to find), the process is killed; the second process replays the unfinished
inbound item, the model answers again, and the cut message must become the answer.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.support.killed_run import STORE_FILE
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.polling import until
from tests.test_run_telegram import READY, TIMEOUT, gateway_process

PARTIAL = "The answer is being written, "
"""What the stream shows before the model stalls (ends in a space: shown whole)."""


def script_cut_then_whole(models: ScriptedModelServer, answer: str) -> None:
    """The first run's answer stalls after :data:`PARTIAL`; the second run's is whole."""
    models.script(
        reply_text(PARTIAL + answer, chunks=[PARTIAL, answer], stall_after=2),
        reply_text(PARTIAL + answer),
    )


async def kill_mid_stream(
    home: Path, ask: Callable[[], Awaitable[object]], shown: Callable[[], bool]
) -> None:
    """Start the gateway, ``await ask()``, wait until ``shown()`` (the partial message is
    visible) and the store keeps the stream's message, then SIGKILL the process."""
    async with gateway_process(home) as first:
        await first.wait_for_line(READY)
        await ask()
        await until(lambda: shown() and bool(kept_streams(home)), TIMEOUT)
        first.process.kill()
        assert await first.process.wait() == -9


def kept_streams(home: Path) -> list[tuple[str, str]]:
    """The store's ``live_streams`` rows: (session key, message id)."""
    with contextlib.closing(sqlite3.connect(home / STORE_FILE, timeout=TIMEOUT)) as db:
        return list(db.execute("SELECT session_key, message_id FROM live_streams"))
