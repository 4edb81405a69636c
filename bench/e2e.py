"""``python -m bench e2e [--chats N] [--messages M] [--delay S] [--tools]``: end to end.

``commonos run`` runs as a real subprocess against the Telegram simulator and the scripted
model server, both served from this process on 127.0.0.1, with the simulator's flood limits
on (20 a second per chat, 30 a second in all). N chats each send M messages, one after the
other (the next once the answer arrived); the chats run concurrently. With ``--tools`` every
message is a tool turn (one ``read_file`` call, then the answer) with a progress message.

Printed: answers/s, latency p50/p95/p99 (message sent → its answer shown), the gateway
process's CPU seconds per answer and peak RSS, Bot API calls per answer (by method), and the
429s the simulator answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.figures import percentile
from tests.platform_sim.base import SimMessage
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_text,
    reply_tool_call,
)

READY = "ready"
OUTBOUND = ("sendMessage", "editMessageText", "deleteMessage", "sendChatAction")
FIRST_CHAT = 10_000
_DRAINS: set[asyncio.Task[None]] = set()
"""The task reading the gateway's stderr (kept until the benchmark ends)."""


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench e2e", description=__doc__)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.0, help="model reply delay (s)")
    parser.add_argument("--tools", action="store_true", help="tool turns with progress")
    return parser.parse_args(argv)


def _answer(delay: float) -> Callable[[ReceivedRequest], Reply]:
    def respond(request: ReceivedRequest) -> Reply:
        asked = request.last_user_text
        if request.messages[-1].get("role") != "tool" and asked.startswith("tool"):
            return reply_tool_call("read_file", {"path": "notes.txt"}, delay=delay)
        return reply_text(f"answer: {asked}", delay=delay)

    return respond


def _config(home: Path, sim: TelegramSim, model_url: str, chats: Sequence[int]) -> Path:
    allowed = ", ".join(str(c) for c in chats)
    path = home / "config.toml"
    path.write_text(
        f"""[gateway]
data_dir = "{home / "data"}"
log_level = "INFO"

[model]
provider = "openai"
base_url = "{model_url}"
api_key = "bench"
model = "scripted"

[progress]
mode = "all"

[telegram]
enabled = true
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{allowed}]
"""
    )
    return path


async def _start_gateway(config: Path, home: Path) -> asyncio.subprocess.Process:
    env = dict(os.environ, COMMONOS_HOME=str(home))
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(proxy, None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run", "--config", str(config),
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert process.stderr is not None
    async with asyncio.timeout(30):
        while True:
            line = (await process.stderr.readline()).decode()
            if not line:
                raise RuntimeError("commonos run exited before it was ready")
            if READY in line:
                break
    _DRAINS.add(asyncio.get_running_loop().create_task(_drain(process)))
    return process


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stderr is not None
    while await process.stderr.readline():
        pass


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _is_answer(expected: str) -> Callable[[SimMessage], bool]:
    return lambda message: message.text == expected


async def _chat(sim: TelegramSim, chat: int, messages: int, tools: bool) -> list[float]:
    latencies = []
    for n in range(messages):
        text = f"{'tool' if tools else 'plain'} {chat} #{n}"
        started = time.perf_counter()
        await sim.user_says(chat, text)
        await sim.wait_for_bot_message(chat, _is_answer(f"answer: {text}"), 120)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def run(options: argparse.Namespace) -> None:
    chats = [FIRST_CHAT + n for n in range(options.chats)]
    sim = TelegramSim()
    await sim.start()
    model = await ScriptedModelServer().start()
    model.script(*[_answer(options.delay)] * (options.chats * options.messages * 2))
    process = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            process = await _start_gateway(_config(home, sim, model.url, chats), home)
            before_calls, cpu_before = len(sim.calls), _cpu_seconds(process.pid)
            started = time.perf_counter()
            per_chat = await asyncio.gather(
                *(_chat(sim, c, options.messages, options.tools) for c in chats)
            )
            seconds = time.perf_counter() - started
            cpu = _cpu_seconds(process.pid) - cpu_before
            _report(options, sim, before_calls, seconds, cpu, per_chat, process.pid)
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 10)
        await model.stop()
        await sim.stop()


def _report(
    options: argparse.Namespace,
    sim: TelegramSim,
    before_calls: int,
    seconds: float,
    cpu: float,
    per_chat: list[list[float]],
    pid: int,
) -> None:
    answers = options.chats * options.messages
    latencies = [ms for chat in per_chat for ms in chat]
    calls = [c for c in sim.calls[before_calls:] if c.method in OUTBOUND]
    by_method = Counter(c.method for c in calls if c.status == 200)
    limited = sum(1 for c in calls if c.status == 429)
    kind = "tool turns with progress" if options.tools else "plain messages"
    print(f"\nend to end: {options.chats} chats x {options.messages} {kind}, model delay "
          f"{options.delay * 1000:.0f} ms, simulator flood limits on")  # fmt: skip
    print(f"  answers/s            {answers / seconds:8.1f}   ({answers} in {seconds:.2f} s)")
    for name, fraction in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        print(f"  latency {name}          {percentile(latencies, fraction):8.1f} ms")
    print(f"  CPU per answer       {cpu / answers * 1000:8.2f} ms  (gateway process)")
    print(f"  Bot API calls/answer {sum(by_method.values()) / answers:8.2f}   {dict(by_method)}")
    print(f"  429s received        {limited:8d}")
    print(f"  peak RSS             {_peak_rss_mib(pid):8.1f} MiB")


def main(argv: Sequence[str]) -> int:
    asyncio.run(run(_arguments(argv)))
    return 0
