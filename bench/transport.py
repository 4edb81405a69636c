"""Bot API transport: CPU per ``sendMessage`` through python-telegram-bot, PTB's own
``HTTPXRequest`` against ours (:mod:`adapters.telegram.transport`, aiohttp).

The Telegram simulator runs in a child process, so only the client's CPU is counted
(``time.process_time`` of this process over ``sizes.client_calls`` calls, after a warm-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from telegram import Bot
from telegram.request import BaseRequest, HTTPXRequest

from adapters.telegram.transport import AiohttpRequest
from bench.sizes import Sizes

CHAT = 42
WARM_UP = 30
SERVER = f"""
import asyncio, sys
from tests.platform_sim.telegram_sim import FloodLimits, TelegramSim
async def main():
    sim = TelegramSim(flood=FloodLimits(per_chat=10**9, total=10**9))  # no pacing here
    await sim.start()
    sim.chat({CHAT})
    print(sim.url, sim.token, flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


async def _cpu_per_call(request: BaseRequest, url: str, token: str, calls: int) -> float:
    bot = Bot(token, base_url=f"{url}/bot", request=request)
    await bot.initialize()
    try:
        for _ in range(WARM_UP):
            await bot.send_message(CHAT, "<b>warm</b> up", parse_mode="HTML")
        started = time.process_time()
        for n in range(calls):
            await bot.send_message(CHAT, f"answer <b>{n}</b>", parse_mode="HTML")
        return (time.process_time() - started) / calls * 1000
    finally:
        await bot.shutdown()


async def run(sizes: Sizes) -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        url, token = (await server.stdout.readline()).decode().split()
        print("\nBot API transport: CPU per sendMessage (client process, simulator apart)")
        for name, request in (
            ("httpx (PTB default)", HTTPXRequest(connection_pool_size=64)),
            ("aiohttp (ours)", AiohttpRequest(connection_pool_size=64)),
        ):
            ms = await _cpu_per_call(request, url, token, sizes.client_calls)
            print(f"  {name:22s} {ms:6.3f} ms")
    finally:
        server.terminate()
        with contextlib.suppress(ProcessLookupError):
            await server.wait()
