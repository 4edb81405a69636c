"""Turn latency: ``CommonAgent.run_turn`` end to end (store, prompt, hooks, model, tools).

Sessions rotate every ``turns_per_session`` turns, so history stays short and realistic
and each figure includes some session starts.
"""

from __future__ import annotations

from bench.figures import Row, print_table, sample
from bench.rig import Engine, engine
from bench.sizes import Sizes
from core.agent.control import TurnControl
from core.agent.turn import UserMessage


async def run(sizes: Sizes) -> None:
    async with engine() as rig:
        rows = [
            await _case(rig, "text-only turn", "hello there", 1, sizes),
            await _case(rig, "tool call, then text", "/tool please", 2, sizes),
        ]
    notes = ["each turn: SQLite writes + HTTP to the model host on 127.0.0.1"]
    print_table("turn latency (CommonAgent.run_turn)", rows, notes)


async def _case(rig: Engine, what: str, text: str, iterations: int, sizes: Sizes) -> Row:
    async def turn(index: int) -> None:
        key = f"bench:{text[:5]}:{index // sizes.turns_per_session}"
        result = await rig.agent.run_turn(key, UserMessage(text, "bench"), TurnControl())
        if result.status != "completed" or result.iterations != iterations:
            raise RuntimeError(f"{what} #{index}: {result}")

    return await sample(what, turn, sizes.turns, traced=sizes.traced, unit="turn")
