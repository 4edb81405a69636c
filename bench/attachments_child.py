"""The measured half of ``python -m bench attachments``: one fresh process that takes in the
files a user sent, through the real parts, and prints what it cost as one JSON line.

``python -m bench.attachments_child telegram SIM_URL TOKEN SCRATCH`` starts a real
:class:`~adapters.telegram.TelegramAdapter` (python-telegram-bot polling the simulator, a
real SQLite store under ``SCRATCH``), waits for the two documents already queued on the
simulator, then hands each to :meth:`gateway.turns.intake.Intake.take_in` (``getFile``, the file
URL streamed by httpx, the bytes written into ``SCRATCH/workspace/inbox/``).

``python -m bench.attachments_child web SCRATCH`` serves the real web chat
(:class:`~adapters.web.adapter.WebAdapter`) on 127.0.0.1; the parent uploads two files
into it (``POST /api/upload``, streamed into the spool) and sends each with a message;
each is taken in by the intake from the spool.

The first file is the warm-up (imports, connections, the store's first writes); before the
second the process's peak RSS is reset (``5`` into ``/proc/self/clear_refs``) or, where the
kernel refuses that, read as it is, and after it ``VmHWM`` is read again. The simulator and
the uploading client run in the parent process, so their copies of the file are not counted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from adapters.base import Adapter, InboundEvent
from adapters.session_keys import session_key
from adapters.telegram import PollSettings, TelegramAdapter, TelegramSettings
from adapters.web.adapter import WebAdapter, WebSettings
from core.agent.turn import UserMessage
from core.attachments import Attachment
from core.store.sqlite import open_store
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import Place
from gateway.outbound.pipeline import Outbound
from gateway.turns.intake import DEFAULT_ATTACHMENTS, Intake

Measured = dict[str, object]
EVENT_TIMEOUT = 30.0


def memory_kib(field: str) -> int:
    """``VmHWM`` (peak) or ``VmRSS`` (now) of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak() -> bool:
    """Reset ``VmHWM`` to the current RSS; False when the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Events:
    """The adapter's sink: the events it delivers, and a wait for a number of them."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self._arrived = asyncio.Condition()

    async def __call__(self, event: InboundEvent) -> None:
        async with self._arrived:
            self.events.append(event)
            self._arrived.notify_all()

    async def wait(self, count: int) -> list[InboundEvent]:
        async with asyncio.timeout(EVENT_TIMEOUT), self._arrived:
            await self._arrived.wait_for(lambda: len(self.events) >= count)
        return self.events[:count]


async def take_in(intake: Intake, adapter: Adapter, event: InboundEvent, workspace: Path
                  ) -> tuple[float, Attachment]:  # fmt: skip
    """Seconds to take in the file of ``event``, and the file as saved (its sha256 is the
    intake's, counted as the bytes streamed by; the parent checks the file on disk)."""
    message = UserMessage(event.text, origin=f"{event.platform}:{event.update_id}",
                          attachments=event.attachments)  # fmt: skip
    place = Place(Outbound(adapter), event.chat)
    began = time.perf_counter()
    taken = await intake.take_in(str(event.session_key), message, place, workspace)
    seconds = time.perf_counter() - began
    event.receipt.settle(True)
    if taken is None or len(taken.attachments) != 1:
        raise RuntimeError(f"{event.attachments[0].name} was not taken in")
    return seconds, taken.attachments[0]


async def measure_telegram(sim_url: str, token: str, scratch: Path) -> Measured:
    """Two documents queued on the simulator: the warm-up, then the measured one."""
    store = await open_store(scratch / "store.db")
    settings = TelegramSettings(
        base_url=f"{sim_url}/bot", base_file_url=f"{sim_url}/file/bot",
        poll=PollSettings(timeout=1, backoff_initial=0.05, backoff_max=0.2),
    )  # fmt: skip
    adapter = TelegramAdapter(token, store, settings, key_rule=session_key)
    events = Events()
    intake = Intake(store, Delivery(store=store), DEFAULT_ATTACHMENTS)
    workspace = scratch / "workspace"
    workspace.mkdir()
    await adapter.start(events)
    try:
        warm_up, measured = await events.wait(2)
        await take_in(intake, adapter, warm_up, workspace)
        peak = Peak()
        seconds, saved = await take_in(intake, adapter, measured, workspace)
        return peak.measured(seconds, workspace / saved.path, saved)
    finally:
        await adapter.stop()
        await intake.aclose()
        await store.close()


async def measure_web(scratch: Path) -> Measured:
    """The parent uploads and sends (``POST /api/upload``, ``/api/send``) when told: this
    process prints ``url <address>``, then ``ready`` once the warm-up file is taken in; the
    upload of the measured file into the spool counts towards its peak, its time is the
    parent's."""
    store = await open_store(scratch / "store.db")
    adapter = WebAdapter(store, WebSettings(host="127.0.0.1", port=0),
                         spool_dir=scratch / "spool")  # fmt: skip
    events = Events()
    intake = Intake(store, Delivery(store=store), DEFAULT_ATTACHMENTS)
    workspace = scratch / "workspace"
    workspace.mkdir()
    await adapter.start(events)
    try:
        print(f"url {adapter.url}", flush=True)
        (warm_up,) = await events.wait(1)
        await take_in(intake, adapter, warm_up, workspace)
        peak = Peak()
        print("ready", flush=True)
        _, measured = await events.wait(2)
        seconds, saved = await take_in(intake, adapter, measured, workspace)
        return peak.measured(seconds, workspace / saved.path, saved)
    finally:
        await adapter.stop()
        await intake.aclose()
        await store.close()


class Peak:
    """The process's peak RSS from now on (reset now where the kernel allows it)."""

    def __init__(self) -> None:
        self.cleared = reset_peak()
        self.before = memory_kib("VmRSS") if self.cleared else memory_kib("VmHWM")

    def measured(self, seconds: float, path: Path, saved: Attachment) -> Measured:
        return {"seconds": seconds, "path": str(path), "sha256": saved.sha256,
                "size": saved.size, "cleared": self.cleared, "before_kib": self.before,
                "peak_kib": memory_kib("VmHWM")}  # fmt: skip


def main(argv: list[str]) -> int:
    match argv:
        case ["telegram", sim_url, token, scratch]:
            result = asyncio.run(measure_telegram(sim_url, token, Path(scratch)))
        case ["web", scratch]:
            result = asyncio.run(measure_web(Path(scratch)))
        case _:
            print(__doc__, file=sys.stderr)
            return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
