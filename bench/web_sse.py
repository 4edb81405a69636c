"""``python -m bench.web_sse [--clients N]``: memory of N concurrent web chat SSE clients.

The gateway (demo model, real SQLite store, web adapter on a free port) runs in this
process; the clients run in a child process (so their memory is not counted), spread over
10 conversations. Reported: the server's RSS before, with every client connected, and
after turns ran in every conversation while they listened; growth per client; the page
load time (GET /, mean of 20).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

CONVERSATIONS = 10


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def conversation(index: int) -> str:
    return f"benchconv{index % CONVERSATIONS:04d}"


async def clients(url: str, count: int) -> None:
    """The child: hold ``count`` streams open, say "ready" once each got its snapshot."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as http:
        streams = await asyncio.gather(
            *(
                http.get(f"{url}api/events", params={"conversation": conversation(i)})
                for i in range(count)
            )
        )
        await asyncio.gather(*(s.content.readuntil(b"event: snapshot") for s in streams))
        print("ready", flush=True)
        received = await asyncio.gather(*(_drain(s) for s in streams))
        print("frames", sum(received), flush=True)


async def _drain(stream: aiohttp.ClientResponse) -> int:
    frames = 0
    async for line in stream.content:
        frames += line.startswith(b"event: message")
    return frames


async def serve(count: int) -> None:
    from core.model.demo import DemoModel
    from core.store.sqlite import open_store
    from gateway.config import parse_config
    from gateway.web.compose import web_adapter_of
    from gateway.wiring import build_service

    with tempfile.TemporaryDirectory() as tmp:
        data = {"gateway": {"data_dir": tmp}, "web": {"listen": "127.0.0.1:0"}}
        store = await open_store(Path(tmp) / "bench.db")
        service = build_service(parse_config(data, None, {}), store, DemoModel())
        await service.start()
        adapter = web_adapter_of(service)
        url = adapter.url or ""
        try:
            await measure(service, url, count)
        finally:
            await service.stop()
            await store.close()


async def page_load(url: str) -> float:
    async with aiohttp.ClientSession(trust_env=False) as http:
        times = []
        for _ in range(20):
            started = time.perf_counter()
            async with http.get(url) as page:
                await page.read()
            times.append(time.perf_counter() - started)
    return statistics.mean(times) * 1000


async def measure(service: object, url: str, count: int) -> None:
    before = rss_mib()
    load_ms = await page_load(url)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.web_sse", "--client", url, "--clients", str(count),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"ready"
    connected = rss_mib()
    started = time.perf_counter()
    async with aiohttp.ClientSession(trust_env=False) as http:
        for turn in range(3):
            for index in range(CONVERSATIONS):
                body = {"conversation": conversation(index), "id": f"bench{turn}x{index}xx",
                        "text": "hello"}  # fmt: skip
                async with http.post(f"{url}api/send", json=body) as sent:
                    assert sent.status == 202
            for index in range(CONVERSATIONS):
                await service.dispatcher.wait_idle(f"web:dm:{conversation(index)}")  # type: ignore[attr-defined]
    turns_s = time.perf_counter() - started
    after = rss_mib()
    child.terminate()
    await child.wait()
    per_client = (after - before) * 1024 / count
    print(f"web SSE fan-out: {count} clients over {CONVERSATIONS} conversations")
    print(f"  page load (GET /, mean of 20)      {load_ms:8.2f} ms")
    print(f"  server RSS before clients          {before:8.1f} MiB")
    print(f"  server RSS, all connected          {connected:8.1f} MiB")
    print(f"  server RSS after 30 turns          {after:8.1f} MiB  ({turns_s:.1f} s of turns)")
    print(f"  growth per client                  {per_client:8.1f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.web_sse", description=__doc__)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(clients(args.client, args.clients))
    else:
        asyncio.run(serve(args.clients))


if __name__ == "__main__":
    main()
