"""``python -m bench budgets``: one person's answers as fast as Telegram allows (issue 28).

``commonos run`` runs as a real subprocess against the Telegram simulator — enforcing
Telegram's per-chat behaviour (:class:`~tests.platform_sim.telegram_types.ChatBursts`: a
short burst, then about one message a second, then HTTP 429 with ``retry_after``) — and the
scripted model server answering at once (0 ms model), both in this process on 127.0.0.1.

* **1 chat × 10**: one person sends 10 messages, each when the previous answer arrived.
* **3 merged, reactions on**: three messages within ``debounce_ms`` are one turn; each gets
  👀 and 👍; the time from the model's answer to the reply shown.
* **20 chats × 5**: twenty people at once, five messages each.

Each is printed beside the figure measured on the code before issue 28's point 4
(``BEFORE``: commit 785ada9 with this driver and simulator; a chat's budget was a sliding
window of 3 messages in 3 s, reactions charged to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.e2e import _chat as chat_turns
from bench.e2e import _start_gateway as start_gateway
from bench.figures import percentile
from bench.sizes import Sizes
from tests.platform_sim.telegram_sim import ChatBursts, FloodLimits, TelegramSim
from tests.support.model_server import ReceivedRequest, Reply, ScriptedModelServer, reply_text

FIRST_CHAT = 20_000
WARM_CHAT = FIRST_CHAT - 1
"""One message here first warms the gateway up (its own chat: no other chat's budget)."""
MERGED = 3
DEBOUNCE_MS = 300
TELEGRAM_BURSTS = ChatBursts(burst=6, per_second=1.0)
"""The simulator's per-chat flood control for these runs (Telegram: ~1 a second, bursts)."""
BEFORE = {
    "1x10 answers/s": 0.7,
    "1x10 p50 ms": 26.9,
    "1x10 p99 ms": 3003.2,
    "1x10 429s": 0.0,
    "merged reply after answer ms": 2998.1,
    "20x5 answers/s": 14.2,
    "20x5 429s": 0.0,
}
"""Measured with this driver on the code before (see the module docstring)."""


@dataclass(slots=True)
class Rig:
    sim: TelegramSim
    model: ScriptedModelServer
    answered: dict[str, float]
    """The time each question's answer left the model (``time.perf_counter``)."""


def _answer(answered: dict[str, float]) -> Callable[[ReceivedRequest], Reply]:
    def respond(request: ReceivedRequest) -> Reply:
        asked = request.last_user_text
        answered[asked] = time.perf_counter()
        return reply_text(f"answer: {asked}")

    return respond


def _config(home: Path, rig: Rig, chats: Sequence[int], reactions: bool) -> Path:
    allowed = ", ".join(str(c) for c in [WARM_CHAT, *chats])
    path = home / "config.toml"
    path.write_text(
        f"""[gateway]
data_dir = "{home / "data"}"

[model]
provider = "openai"
base_url = "{rig.model.url}"
api_key = "bench"
model = "scripted"

[profiles.default]
debounce_ms = {DEBOUNCE_MS if reactions else 0}

[progress]
reactions = {"true" if reactions else "false"}

[web]
enabled = false

[telegram]
enabled = true
token = "{rig.sim.token}"
base_url = "{rig.sim.url}/bot"
base_file_url = "{rig.sim.url}/file/bot"
allowed_users = [{allowed}]
"""
    )
    return path


@asynccontextmanager
async def _running(chats: Sequence[int], *, reactions: bool = False) -> AsyncIterator[Rig]:
    sim = TelegramSim(flood=FloodLimits(chat_bursts=TELEGRAM_BURSTS))
    await sim.start()
    model = await ScriptedModelServer().start()
    rig = Rig(sim, model, {})
    model.script(*[_answer(rig.answered)] * (len(chats) * 10 + MERGED + 1))
    process = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            process = await start_gateway(_config(home, rig, chats, reactions), home)
            await chat_turns(sim, WARM_CHAT, 1, False)
            rig.answered.clear()
            yield rig
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 10)
        await model.stop()
        await sim.stop()


def _refused(sim: TelegramSim) -> int:
    """429s the simulator answered."""
    return sum(1 for call in sim.calls if call.status == 429)


async def one_chat(messages: int = 10) -> dict[str, float]:
    chat = FIRST_CHAT
    async with _running([chat]) as rig:
        started = time.perf_counter()
        latencies = await chat_turns(rig.sim, chat, messages, False)
        seconds = time.perf_counter() - started
        return {
            "1x10 answers/s": messages / seconds,
            "1x10 p50 ms": percentile(latencies, 0.5),
            "1x10 p99 ms": percentile(latencies, 0.99),
            "1x10 429s": _refused(rig.sim),
        }


async def merged_with_reactions() -> dict[str, float]:
    chat = FIRST_CHAT
    async with _running([chat], reactions=True) as rig:
        texts = [f"part {n}" for n in range(MERGED)]
        for text in texts:
            await rig.sim.user_says(chat, text)
        await rig.sim.wait_for_bot_message(chat, lambda m: m.text.startswith("answer:"), 30)
        shown = time.perf_counter()
        answered = max(rig.answered.values())
        return {"merged reply after answer ms": (shown - answered) * 1000}


async def many_chats(chats: int = 20, messages: int = 5) -> dict[str, float]:
    ids = [FIRST_CHAT + n for n in range(chats)]
    async with _running(ids) as rig:
        started = time.perf_counter()
        await asyncio.gather(*(chat_turns(rig.sim, c, messages, False) for c in ids))
        seconds = time.perf_counter() - started
        return {"20x5 answers/s": chats * messages / seconds, "20x5 429s": _refused(rig.sim)}


async def measure() -> dict[str, float]:
    figures: dict[str, float] = {}
    for scenario in (one_chat(), merged_with_reactions(), many_chats()):
        figures.update(await scenario)
    return figures


def report(figures: dict[str, float]) -> None:
    print("\nper-chat budgets: Telegram simulator with per-chat bursts and 429s, 0 ms model")
    print(f"  {'':32s} {'before':>9s} {'now':>9s}")
    for name, value in figures.items():
        print(f"  {name:32s} {BEFORE.get(name, float('nan')):9.1f} {value:9.1f}")


async def run(sizes: Sizes) -> None:
    report(await measure())


if __name__ == "__main__":
    report(asyncio.run(measure()))
