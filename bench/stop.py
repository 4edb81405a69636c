"""Stop latency: ``Dispatcher.stop(key)`` to the turn's result, while the model call hangs.

Each round submits a ``/hang`` message; the model host reports when it holds the request,
then the clock starts and ``stop`` is called. The clock stops when ``on_result`` receives
the turn's ``interrupted`` result (the HTTP request aborted, the turn recorded).
"""

from __future__ import annotations

import asyncio
import time

from bench.figures import Row, print_table, traced_peak
from bench.rig import Engine, engine
from bench.sizes import Sizes
from core.agent.turn import TurnResult, UserMessage
from core.dispatcher import Dispatcher

WAIT_SECONDS = 10.0


class StopRound:
    """One hang-and-stop on a key; ``result`` receives the turn's outcome."""

    def __init__(self) -> None:
        self.result: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()

    async def observe(self, key: str, message: UserMessage, result: TurnResult) -> None:
        self.result.set_result(result)


async def run(sizes: Sizes) -> None:
    async with engine() as rig:
        peak = await traced_peak(lambda: _rounds(rig, max(2, sizes.stops // 10), "warm"))
        started = time.perf_counter()
        latencies = await _rounds(rig, sizes.stops, "bench")
        seconds = time.perf_counter() - started
    row = Row("stop during model call", sizes.stops, latencies, seconds, peak, unit="round")
    note = "latency: stop() to TurnResult (interrupted/cancelled) via on_result"
    print_table("stop latency (Dispatcher.stop, hanging model call)", [row], [note])


async def _rounds(rig: Engine, count: int, prefix: str) -> list[float]:
    return [await _round(rig, f"{prefix}:stop:{number}") for number in range(count)]


async def _round(rig: Engine, key: str) -> float:
    stop_round = StopRound()
    dispatcher = Dispatcher(rig.agent.run_turn, on_result=stop_round.observe)
    try:
        dispatcher.submit(key, UserMessage("/hang on", "bench"))
        await asyncio.wait_for(rig.host.held.get(), WAIT_SECONDS)
        began = time.perf_counter()
        dispatcher.stop(key)
        result = await asyncio.wait_for(stop_round.result, WAIT_SECONDS)
        elapsed = (time.perf_counter() - began) * 1000
    finally:
        await dispatcher.aclose()
    if (result.status, result.exit_reason) != ("interrupted", "cancelled"):
        raise RuntimeError(f"{key}: stop gave {result}")
    return elapsed
