"""Streamed answers: from the model's first token to the first text the user sees, per
platform, and the platform calls one answer costs with streaming on and off.

Each case runs the whole gateway (:mod:`bench.stream_rigs`) as ``commonos run`` composes
it (the config's platform section → the platform registry's factory →
:func:`gateway.wiring.build_service`) with the real SDK (discord.py, python-telegram-bot,
slack-bolt, the web chat's own server) against its simulator, the OpenAI client against
the scripted model server and a real SQLite file, all on 127.0.0.1 in this process, on the
real clock (every pace and budget waited for).
The model streams the same answer each time: ``WORDS`` words, one SSE event every ``GAP``
seconds (about 1.5 s of writing, so a paced stream makes a few updates).
``sizes.stream_answers`` questions are asked one after the other, each where its row says:
in a chat of its own (a Discord or Slack thread, a Telegram private chat or group: a
fresh budget, as a new conversation has), or back to back in one Discord DM (the budget the
last answers spent still counts).

First visible text: the model's first token is sent ``GAP`` after the request reached the
model server (its first event is the role, the first word follows one gap later); the first
text is the arrival at the simulator of the first call that shows any of the answer — the
Discord message sent (edit mode) or the reply (off), a Telegram draft (private chat) or
message (group), the Slack stream's start (or its first append) or the reply, the web chat's
first live-text SSE frame as read by a client. Calls per answer: the platform calls the
bot made between the question and the end of its turn (sends, edits, drafts, stream calls,
deletes, typing; never polling or connection calls); for the web chat, the SSE frames
pushed. 429s: the simulator's rate-limit answers during the case.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.figures import percentile, print_grid
from bench.sizes import Sizes
from bench.stream_rigs import (
    GAP,
    WORDS,
    Answer,
    RigFactory,
    discord_rig,
    slack_rig,
    telegram_rig,
    web_rig,
)


@dataclass(frozen=True, slots=True)
class Case:
    platform: str
    path: str
    streaming: str
    rig: RigFactory


@dataclass(frozen=True, slots=True)
class Result:
    case: Case
    answers: Sequence[Answer]
    rate_limited: int


# the table ---------------------------------------------------------------------------------
CASES = [
    Case("discord", "edit in place (a thread each)", "edit", discord_rig(threads=True)),
    Case("discord", "edit in place (one DM, back to back)", "edit", discord_rig(threads=False)),
    Case("discord", "the reply (a thread each)", "off", discord_rig(threads=True)),
    Case("telegram", "draft (a private chat each)", "native", telegram_rig(groups=False)),
    Case("telegram", "the reply (a private chat each)", "off", telegram_rig(groups=False)),
    Case("telegram", "group edit (a group each)", "native", telegram_rig(groups=True)),
    Case("telegram", "the reply (a group each)", "off", telegram_rig(groups=True)),
    Case("slack", "chat stream (a thread each)", "native", slack_rig),
    Case("slack", "the reply (a thread each)", "off", slack_rig),
    Case("web chat", "live text", "on", web_rig),
]


async def run(sizes: Sizes) -> None:
    results = [await _measure(case, sizes.stream_answers) for case in CASES]
    print_grid(
        "streamed answers: model's first token -> first visible text",
        ("platform", "path", "streaming", "n", "p50 ms", "p95 ms", "calls/answer", "429s"),
        [_cells(result) for result in results],
        _notes(sizes),
    )


async def _measure(case: Case, answers: int) -> Result:
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as folder:
        async with case.rig(case.streaming, Path(folder)) as rig:
            await rig.ask(0)  # warm-up: connections, the first session
            measured = [await rig.ask(index) for index in range(1, answers + 1)]
            return Result(case, measured, rig.rate_limited())


def _cells(result: Result) -> tuple[str, ...]:
    latencies = [a.latency_ms for a in result.answers]
    calls = sum(a.calls for a in result.answers) / len(result.answers)
    case = result.case
    return (case.platform, case.path, case.streaming, str(len(latencies)),
            f"{percentile(latencies, 0.5):.1f}", f"{percentile(latencies, 0.95):.1f}",
            f"{calls:.1f}", str(result.rate_limited))  # fmt: skip


def _notes(sizes: Sizes) -> list[str]:
    return [
        f"answer: {WORDS} words, one SSE event every {GAP * 1000:.0f} ms "
        f"(~{WORDS * GAP:.1f} s of writing); {sizes.stream_answers} answers per row after "
        "one warm-up, one after the other; real clock, real SDKs, simulators on 127.0.0.1",
        "first token: the model server's request arrival + one gap; first visible: the "
        "simulator's arrival of the first call showing answer text (web: the SSE frame read)",
        "streaming off: the first visible text is the whole reply (the turn's end)",
        "calls/answer: the bot's calls into the answer's chat (typing included; progress off);"
        " web chat: SSE frames pushed",
        "one DM, back to back: the next question right after the last answer, whose sends "
        "and edits still fill Discord's channel budget (5 per 5 s): its first text waits",
    ]
