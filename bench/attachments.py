"""Taking in a 20 MB file: the time and the peak RSS growth, through the real path.

A user of the Telegram simulator sends a document of exactly 20 MiB, the largest a bot may
download (the simulator's ``getFile`` refuses only a file *over* ``DOWNLOAD_LIMIT``, as
Telegram does; the gateway's ``[attachments] max_bytes`` default is the same 20 MiB). A
fresh child process (:mod:`bench.attachments_child`) runs the real TelegramAdapter
(python-telegram-bot polling the simulator over 127.0.0.1), which offers the document; the
gateway's :class:`~gateway.turns.intake.Intake` then takes it in: ``getFile``, the file URL
streamed by httpx in 64 KiB chunks, written into a session workspace's ``inbox/`` in a temp
dir, with its sha256 and rows in a real SQLite store. A 1 MiB document is taken in first in
the same process as a warm-up.

For comparison, the web chat: the child serves the real WebAdapter on 127.0.0.1; this
process uploads the same 20 MiB (``POST /api/upload``, multipart, streamed by the route into
the conversation's spool) and sends it (``POST /api/send``); the intake copies it from the
spool into the inbox. Its time is the upload's round trip (measured here) plus
``take_in``; its growth includes the upload route's, as the child serves it.

Peak RSS growth: the child resets its peak (``/proc/self/clear_refs``) right before the big
file, and reads ``VmHWM`` after it; growth = that peak minus the RSS at the reset (where
the kernel refuses the reset: the peak after minus the peak before). The simulator, which
holds the file's bytes to serve them, runs in this (the parent) process, so it is not
counted. Each run is a new child (and simulator); the table shows the median and the
worst of ``intake_runs`` runs. The saved file's sha256 (read back here, after the child
exited) must equal the sent bytes' and the one the intake recorded, and the simulator must
have served the file once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp

from bench.figures import MIB, print_grid
from bench.sizes import Sizes
from tests.platform_sim.telegram_files import DOWNLOAD_LIMIT
from tests.platform_sim.telegram_sim import ALICE, TelegramSim

FILE_BYTES = DOWNLOAD_LIMIT
WARM_UP_BYTES = 1 * MIB
CHILD_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Run:
    seconds: float
    growth_mib: float
    cleared: bool


async def run(sizes: Sizes) -> None:
    data = os.urandom(FILE_BYTES)
    expected = hashlib.sha256(data).hexdigest()
    telegram = [await _telegram_run(data, expected) for _ in range(sizes.intake_runs)]
    web = [await _web_run(data, expected) for _ in range(sizes.intake_runs)]
    rows = [
        _row("telegram: document -> getFile -> httpx stream -> intake", telegram),
        _row("web chat: POST /api/upload -> spool -> intake", web),
    ]
    runs = [*telegram, *web]
    method = (
        "reset by clear_refs, then VmHWM - VmRSS at the reset"
        if all(r.cleared for r in runs)
        else "VmHWM after - VmHWM before (clear_refs refused)"
    )
    notes = [
        f"file: {FILE_BYTES:,} bytes ({FILE_BYTES / MIB:.0f} MiB: the Telegram simulator's "
        f"getFile limit, the largest it serves; also [attachments] max_bytes' default), "
        f"random bytes; warm-up: one {WARM_UP_BYTES // MIB} MiB file first, in the same child",
        f"each run: a fresh child process (and simulator); RSS growth of the child: {method}",
        "telegram time: take_in (getFile + download + write + fsync + store rows); "
        "web time: the upload's POST round trip + take_in (spool -> inbox copy)",
        "sha256 of the saved file = the sent bytes' = the intake's record, in every run; "
        "the Telegram simulator served the file once per run",
    ]
    print_grid("attachment intake, 20 MiB (fresh process per run)", HEADER, rows, notes)


async def _telegram_run(data: bytes, expected: str) -> Run:
    sim = TelegramSim()
    await sim.start()
    try:
        await sim.user_sends(ALICE.id, "document", os.urandom(WARM_UP_BYTES), name="warm.bin")
        sent = await sim.user_sends(ALICE.id, "document", data, name="big.bin")
        with tempfile.TemporaryDirectory(prefix="commonos-bench-") as scratch:
            child = await _spawn("telegram", sim.url, sim.token, scratch)
            result = await _result(child)
            _check(result, expected, len(data))
        file_id = sent.raw["document"]["file_id"]
        if sim.files.downloads[file_id] != 1:
            raise RuntimeError(f"the file was downloaded {sim.files.downloads[file_id]} times")
    finally:
        await sim.stop()
    return _run_of(result)


async def _web_run(data: bytes, expected: str) -> Run:
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as scratch:
        child = await _spawn("web", scratch)
        assert child.stdout is not None
        url = (await _line(child.stdout)).removeprefix("url ").rstrip("/")
        conversation = secrets.token_hex(8)
        async with aiohttp.ClientSession(trust_env=False) as http:
            await _upload_and_send(http, url, conversation, os.urandom(WARM_UP_BYTES))
            if await _line(child.stdout) != "ready":
                raise RuntimeError("bench.attachments_child web: not ready")
            began = time.perf_counter()
            await _upload_and_send(http, url, conversation, data)
            upload_seconds = time.perf_counter() - began
        result = await _result(child)
        _check(result, expected, len(data))
    measured = _run_of(result)
    return replace(measured, seconds=measured.seconds + upload_seconds)


async def _upload_and_send(
    http: aiohttp.ClientSession, url: str, conversation: str, data: bytes
) -> None:
    """Upload ``data`` (multipart, as the page does) and send it with a message."""
    form = aiohttp.FormData()
    form.add_field("file", data, filename="big.bin", content_type="application/octet-stream")
    where = {"conversation": conversation}
    async with http.post(f"{url}/api/upload", params=where, data=form) as response:
        if response.status != 201:
            raise RuntimeError(f"upload answered {response.status}: {await response.text()}")
        upload = (await response.json())["upload"]
    body = {"conversation": conversation, "id": secrets.token_hex(8), "text": "",
            "uploads": [upload]}  # fmt: skip
    async with http.post(f"{url}/api/send", json=body) as response:
        if response.status != 202:
            raise RuntimeError(f"send answered {response.status}: {await response.text()}")


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.attachments_child", *args, stdout=asyncio.subprocess.PIPE
    )


async def _line(stream: asyncio.StreamReader) -> str:
    async with asyncio.timeout(CHILD_TIMEOUT):
        return (await stream.readline()).decode().strip()


async def _result(child: asyncio.subprocess.Process) -> dict[str, object]:
    """The child's last line, its JSON result (the simulator keeps serving meanwhile)."""
    async with asyncio.timeout(CHILD_TIMEOUT):
        out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"bench.attachments_child exited {child.returncode}")
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _run_of(result: dict[str, object]) -> Run:
    growth = (int(str(result["peak_kib"])) - int(str(result["before_kib"]))) / 1024
    return Run(float(str(result["seconds"])), growth, bool(result["cleared"]))


def _check(result: dict[str, object], expected: str, size: int) -> None:
    saved = Path(str(result["path"]))
    on_disk = _sha256(saved)
    if (on_disk, result["sha256"], result["size"]) != (expected, expected, size):
        raise RuntimeError(
            f"{saved.name}: saved {result['size']} bytes, sha256 {on_disk} on disk, "
            f"{result['sha256']} recorded; sent {size} bytes, {expected}"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def _row(what: str, runs: Sequence[Run]) -> tuple[str, ...]:
    seconds = statistics.median(r.seconds for r in runs)
    growth = statistics.median(r.growth_mib for r in runs)
    worst = max(r.growth_mib for r in runs)
    size_mib = FILE_BYTES / MIB
    return (
        what, str(len(runs)), f"{size_mib:.0f}", f"{seconds:.3f}",
        f"{max(r.seconds for r in runs):.3f}", f"{size_mib / seconds:.0f}",
        f"{growth:.1f}", f"{worst:.1f}", f"{growth / size_mib:.2f}",
    )  # fmt: skip


HEADER = ("case", "runs", "file MiB", "median s", "max s", "MiB/s", "RSS growth MiB",
          "max growth MiB", "growth / file")  # fmt: skip
