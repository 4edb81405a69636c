"""``python -m bench kill_streams``: ``commonos run`` killed (SIGKILL) at random moments of
a streamed answer on Discord and Slack, then restarted on the same store and simulator
(issue 28 point 7; docs/architecture.md §13).

Each kill is one fresh run: a simulator, the scripted model streaming a 30-word answer a
word every 0.1 s, a home with its SQLite store. The user asks (Discord: a DM, edited in
place; Slack: a channel mention, a native chat stream in its thread), the process is
killed a uniform random 0.3–3.5 s later (before the first update, mid-stream, or after the
answer), started again, and left until the inbox has no unfinished item. Printed per
platform: answers shown once (exactly one visible bot message is the answer) and cut copies
left (visible bot messages that are not the answer, a live stream included).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.sizes import Sizes
from tests.platform_sim.discord_sim import ALICE as DISCORD_ALICE
from tests.platform_sim.discord_sim import DiscordSim
from tests.platform_sim.slack_sim import ALICE as SLACK_ALICE
from tests.platform_sim.slack_sim import GENERAL, SlackSim
from tests.support.killed_run import restarted, settled, write_config
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.test_run_telegram import READY, gateway_process

KILLS = 10
"""Kills per platform (fewer with ``--quick``: ``Sizes.stream_answers``)."""
SEED = 28
ANSWER = " ".join(f"word{n:02d}" for n in range(30)) + "."
GAP = 0.1
"""Seconds between two streamed words."""
EARLIEST, LATEST = 0.3, 3.5
"""The kill's moment after the question, in seconds."""
QUESTION = "stream me the answer"


@dataclass(slots=True)
class Tally:
    kills: int = 0
    shown_once: int = 0
    cut_copies: int = 0


async def run(sizes: Sizes) -> None:
    kills = min(KILLS, sizes.stream_answers)
    rng = random.Random(SEED)
    print(f"kill_streams: kill -9 mid-stream, {kills} per platform (seed {SEED})")
    print(f"{'platform':<10}{'kills':>6}{'answers shown once':>20}{'cut copies left':>17}")
    for platform in ("discord", "slack"):
        tally = Tally()
        for _ in range(kills):
            shown, cut = await _one_kill(platform, rng.uniform(EARLIEST, LATEST))
            tally.kills += 1
            tally.shown_once += shown
            tally.cut_copies += cut
        print(f"{platform:<10}{tally.kills:>6}{tally.shown_once:>20}{tally.cut_copies:>17}")


async def _one_kill(platform: str, moment: float) -> tuple[bool, int]:
    """One run killed ``moment`` s after the question, and its restart: (the answer is shown
    exactly once, how many other bot messages are visible)."""
    with tempfile.TemporaryDirectory(prefix="kill-streams-") as root:
        home = Path(root)
        async with ScriptedModelServer() as models:
            models.default = reply_text(ANSWER, gap=GAP)
            if platform == "discord":
                return await _discord(home, models, moment)
            return await _slack(home, models, moment)


Ask = Callable[[], Awaitable[object]]


async def _kill_at(home: Path, platform: str, moment: float, ask: Ask) -> None:
    """Run, ask, kill ``moment`` s later; run again until the inbox is settled."""
    async with gateway_process(home) as first:
        await first.wait_for_line(READY)
        await ask()
        await asyncio.sleep(moment)  # the random moment itself, not a condition
        first.process.kill()
        await first.process.wait()
    async with restarted(home):
        await settled(home, platform)


async def _discord(home: Path, models: ScriptedModelServer, moment: float) -> tuple[bool, int]:
    sim = DiscordSim()
    await sim.start()
    try:
        write_config(home, models, f"""
[discord]
token = "{sim.token}"
api_base = "{sim.api_base}"
gateway_url = "{sim.gateway_url}"
allowed_users = ["{DISCORD_ALICE.id}"]
""")  # fmt: skip
        dm = sim.dm_channel(DISCORD_ALICE)
        await _kill_at(home, "discord", moment, lambda: sim.user_says(dm, QUESTION))
        return _counted([m.text for m in sim.bot_messages(dm)])
    finally:
        await sim.stop()


async def _slack(home: Path, models: ScriptedModelServer, moment: float) -> tuple[bool, int]:
    sim = SlackSim()
    await sim.start()
    try:
        write_config(home, models, f"""
[slack]
bot_token = "{sim.bot_token}"
app_token = "{sim.app_token}"
api_base_url = "{sim.api_url}"
allowed_users = ["{SLACK_ALICE.id}"]
""")  # fmt: skip
        mention = f"{sim.mention} {QUESTION}"
        await _kill_at(home, "slack", moment, lambda: sim.user_says(GENERAL, mention))
        live = sum(1 for s in sim.streams.values() if s.live)
        shown, cut = _counted([m.text for m in sim.bot_messages(GENERAL) if not m.deleted])
        return shown, max(cut, live)
    finally:
        await sim.stop()


def _counted(texts: list[str]) -> tuple[bool, int]:
    return texts.count(ANSWER) == 1, sum(1 for text in texts if text != ANSWER)
