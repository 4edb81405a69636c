"""Dispatcher throughput and memory: many keys, a few messages each, queue policy.

Every message is submitted up front (the 2nd and later of a key queue behind the 1st), the
turns run through the real ``CommonAgent``, and the run ends when ``on_result`` has seen
every one. Afterwards the Dispatcher must hold nothing for any key, and the agent's session
lock map must be empty: per-key state that outlives its turns is a leak.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from bench.figures import Row, print_table, traced_peak
from bench.rig import engine
from bench.sizes import Sizes
from core.agent.turn import TurnResult, UserMessage
from core.dispatcher import Dispatcher

FINISH_SECONDS = 300.0


@dataclass(slots=True)
class Tally:
    """What the run left behind, read after every turn finished."""

    expected: int
    completed: int = 0
    failed: int = 0
    lanes: int = -1
    workers: int = -1
    locks: int = -1
    seconds: float = 0.0
    submitted: dict[UserMessage, float] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def observe(self, key: str, message: UserMessage, result: TurnResult) -> None:
        began = self.submitted.pop(message)
        self.latencies_ms.append((time.perf_counter() - began) * 1000)
        if result.status == "completed":
            self.completed += 1
        else:
            self.failed += 1
        if self.completed + self.failed == self.expected:
            self.done.set()


async def run(sizes: Sizes) -> None:
    timing = await _dispatch(sizes)
    peak = await traced_peak(lambda: _dispatch(sizes))
    turns = timing.expected
    what = f"{sizes.dispatch_keys} keys x {sizes.dispatch_messages} msgs"
    row = Row(what, turns, timing.latencies_ms, timing.seconds, peak, unit="turn")
    print_table("dispatcher throughput (queue policy, real CommonAgent)", [row], _notes(timing))


def _notes(tally: Tally) -> list[str]:
    return [
        "latency: submit to result, queue wait included (all submitted at once)",
        f"total {tally.seconds:.2f} s; completed {tally.completed}, failed {tally.failed}",
        f"after all turns: dispatcher lanes {tally.lanes}, workers {tally.workers}"
        f", agent session locks {tally.locks} (all must be 0)",
    ]


async def _dispatch(sizes: Sizes) -> Tally:
    keys = [f"bench:dm:{number}" for number in range(sizes.dispatch_keys)]
    tally = Tally(len(keys) * sizes.dispatch_messages)
    async with engine() as rig:
        dispatcher = Dispatcher(rig.agent.run_turn, on_result=tally.observe)
        started = time.perf_counter()
        for round_number in range(sizes.dispatch_messages):
            for key in keys:
                _submit(dispatcher, key, f"message {round_number} to {key}", tally)
        await asyncio.wait_for(tally.done.wait(), FINISH_SECONDS)
        for key in keys:
            await dispatcher.wait_idle(key)
        tally.seconds = time.perf_counter() - started
        tally.lanes, tally.workers = len(dispatcher.busy_keys), dispatcher.worker_count
        tally.locks = len(rig.agent.locks)
        await dispatcher.aclose()
    return tally


def _submit(dispatcher: Dispatcher, key: str, text: str, tally: Tally) -> None:
    message = UserMessage(text, "bench")
    tally.submitted[message] = time.perf_counter()
    outcome = dispatcher.submit(key, message)
    if outcome.kind not in ("started", "queued"):
        raise RuntimeError(f"{key}: submit was {outcome.kind}")
