"""``python -m bench edges``: issue 29's figures, before (a checkout of 785ada9) and after.

Two checkouts are measured in one run, side by side: ``before`` is a git worktree of the
commit the issue names (``BENCH_EDGES_BEFORE``, default ``/tmp/before29``; made when
missing with ``git worktree add --detach /tmp/before29 785ada9``) and ``after`` this tree
(``BENCH_EDGES_AFTER``: another checkout, e.g. a worktree of HEAD while this tree holds
someone's unfinished edits).
Each runs in its own interpreter with ``PYTHONPATH`` and the working directory set to that
checkout (the ``core.__file__`` each resolves to is printed, so a wrong path shows).

**The message trace** (the method of the issue's review, research/code-review.md): the
gateway is composed by the real wiring (config file → :class:`gateway.app.Gateway`:
``parse_config`` → store → ``build_service`` → ``service.start()``) against the repo's
Telegram or Discord simulator and the scripted model server, with ``[web]`` off and one
allowed user. ``sys.setprofile`` records the *first* entry of every frame whose file lies
under ``core/``, ``adapters/`` or ``gateway/`` of that checkout (a resumed coroutine is the
same frame), from the user's first message of a new session until its inbox item is done;
frames whose stack holds the poll for ``done`` are left out. Counted: distinct files
(modules), distinct (file, qualname) (functions), all entries, and switches — consecutive
entries whose top folder differs. "streaming off" sets the platform's ``streaming = "off"``
and ``[profiles.default] stream = false``; "default" leaves both as configured by default.

**CPU per answer and RSS at ready**: ``commonos run`` (``python -m gateway run``) as a
subprocess against the Telegram simulator and a 0 ms scripted model; RSS (``VmRSS``) read
when it logs ready; then one warm-up message in a chat of its own, then 1 chat × 10
(each message once the previous answer arrived) or 20 chats × 5 at once; CPU is the
process's CPU time (its threads' ``schedstat``) over the messages divided by the answers.
Each side's figure is the median of :data:`ROUNDS` runs, the two sides taking turns; the
change is the median of each round's own change (after against the before run beside it),
so a load that comes and goes on the shared machine falls on both runs it compares.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.sizes import Sizes

HERE = Path(__file__).resolve()
AFTER = Path(os.environ.get("BENCH_EDGES_AFTER", HERE.parent.parent))
BEFORE = Path(os.environ.get("BENCH_EDGES_BEFORE", "/tmp/before29"))
LAYERS = ("core", "adapters", "gateway")
RESUMABLE = 0x20 | 0x80 | 0x200
"""``CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR``: frames entered more than once."""
TELEGRAM_USER = 4242
CASES = (("telegram", "off"), ("telegram", "default"), ("discord", "off"), ("discord", "default"))
SETTLE_SECONDS = 10.0


# --- the trace (runs in a child interpreter inside the checkout) -----------------------------
@dataclass
class Trace:
    """First entries of our frames, in order: (top folder, file, qualname)."""

    root: str
    skip: CodeType
    entries: list[tuple[str, str, str]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    alive: list[FrameType] = field(default_factory=list)
    """Resumable frames seen, kept so their ids are not reused while tracing."""

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(self.root):
            return
        top = path[len(self.root) :].split("/", 1)[0]
        if top not in LAYERS or self._polling(frame) or not self._first(frame):
            return
        self.entries.append((top, path[len(self.root) :], frame.f_code.co_qualname))

    def _first(self, frame: FrameType) -> bool:
        if not frame.f_code.co_flags & RESUMABLE:
            return True
        if id(frame) in self.seen:
            return False
        self.seen.add(id(frame))
        self.alive.append(frame)
        return True

    def _polling(self, frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code is self.skip:
                return True
            frame = frame.f_back
        return False

    def figures(self) -> dict[str, int]:
        tops = [top for top, _, _ in self.entries]
        return {
            "modules": len({path for _, path, _ in self.entries}),
            "functions": len({(path, name) for _, path, name in self.entries}),
            "entries": len(self.entries),
            "switches": sum(1 for a, b in itertools.pairwise(tops) if a != b),
        }


def _config_text(platform: str, streaming: str, model_url: str, sim: Any, home: Path) -> str:
    off = streaming == "off"
    profile = "\n[profiles.default]\nstream = false\n" if off else ""
    section = (
        f'token = "{sim.token}"\nbase_url = "{sim.url}/bot"\n'
        f'base_file_url = "{sim.url}/file/bot"\nallowed_users = [{TELEGRAM_USER}]\n'
        if platform == "telegram"
        else f'token = "{sim.token}"\napi_base = "{sim.api_base}"\n'
        f'gateway_url = "{sim.gateway_url}"\nallowed_users = ["3001"]\n'
    )
    return (
        f'[gateway]\ndata_dir = "{home / "data"}"\n\n[model]\nprovider = "openai"\n'
        f'base_url = "{model_url}"\napi_key = "bench"\nmodel = "scripted"\n{profile}\n'
        f"[web]\nenabled = false\n\n[{platform}]\nenabled = true\n{section}"
        + ('streaming = "off"\n' if off else "")
    )


async def _settled(store: Any, platform: str) -> None:
    """The poll for ``done`` (left out of the trace)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while await store.unfinished_inbound(platform):
        if time.monotonic() > deadline:
            raise RuntimeError("the message was not done in time")
        await asyncio.sleep(0.005)


async def _simulator(platform: str) -> tuple[Any, Callable[[str], Any], Callable[[], Any]]:
    """The started simulator, how the user says something, and how the answer is awaited."""
    if platform == "telegram":
        from tests.platform_sim.telegram_sim import TelegramSim

        tg = TelegramSim()
        await tg.start()
        return (
            tg,
            lambda text: tg.user_says(TELEGRAM_USER, text),
            lambda: tg.wait_for_bot_message(TELEGRAM_USER, lambda m: m.text == "answer: hi", 30),
        )
    import discord
    import yarl

    from tests.platform_sim.discord_sim import ALICE, DiscordSim

    dc = DiscordSim()
    await dc.start()
    discord.http.Route.BASE = dc.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(dc.gateway_url)
    dm = dc.dm_channel(ALICE)
    return (
        dc,
        lambda text: dc.user_says(dm, text),
        lambda: dc.wait_for_bot_message(dm, lambda m: m.text == "answer: hi", 30),
    )


async def trace(root: str, platform: str, streaming: str) -> dict[str, int]:
    """One plain first message of a session, traced (files under ``root`` recorded)."""
    from gateway.app import Gateway
    from gateway.config import load_config
    from tests.support.model_server import ScriptedModelServer, reply_text

    sim, says, answered = await _simulator(platform)
    model = await ScriptedModelServer().start()
    model.script(reply_text("answer: hi"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            path = home / "config.toml"
            path.write_text(_config_text(platform, streaming, model.url, sim, home))
            gateway = Gateway(load_config(path, env={}))
            await gateway.start()
            try:
                store = gateway.store  # read before tracing: the poll is left out
                recorder = Trace(root, _settled.__code__)
                sys.setprofile(recorder)
                try:
                    await says("hi")
                    await answered()
                    await _settled(store, platform)
                finally:
                    sys.setprofile(None)
            finally:
                await gateway.stop()
            return recorder.figures()
    finally:
        await model.stop()
        await sim.stop()


def _child_trace(platform: str, streaming: str) -> None:
    import logging

    import core

    logging.basicConfig(level=logging.ERROR)
    root = str(Path(core.__file__).resolve().parent.parent) + "/"
    figures = asyncio.run(trace(root, platform, streaming))
    print(json.dumps({"core": core.__file__, **figures}))


# --- the parent: children per checkout, CPU and RSS of ``commonos run`` ------------------------
def _environment(checkout: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(proxy, None)
    env.pop("all_proxy", None)
    return env


def traced_in(checkout: Path, platform: str, streaming: str) -> dict[str, Any]:
    """The trace run in a fresh interpreter whose imports resolve inside ``checkout``."""
    boot = (
        "import runpy, sys; sys.argv = ['edges', 'trace', sys.argv[1], sys.argv[2]]; "
        f"runpy.run_path({str(HERE)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", boot, platform, streaming],
        cwd=checkout, env=_environment(checkout), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"trace in {checkout} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _proc(pid: int, name: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """User + system time of every live thread of ``pid`` (``schedstat``: nanoseconds, where
    ``/proc/PID/stat`` counts 10 ms ticks, too coarse for 10 answers)."""
    tasks = Path(f"/proc/{pid}/task")
    with contextlib.suppress(OSError):
        runs = [int((t / "schedstat").read_text().split()[0]) for t in tasks.iterdir()]
        return sum(runs) / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_config(home: Path, sim: Any, model_url: str, chats: Sequence[int]) -> Path:
    allowed = ", ".join(str(c) for c in chats)
    path = home / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{home / "data"}"\n\n[model]\nprovider = "openai"\n'
        f'base_url = "{model_url}"\napi_key = "bench"\nmodel = "scripted"\n\n'
        f'[web]\nenabled = false\n\n[telegram]\nenabled = true\ntoken = "{sim.token}"\n'
        f'base_url = "{sim.url}/bot"\nbase_file_url = "{sim.url}/file/bot"\n'
        f"allowed_users = [{allowed}]\n"
    )
    return path


async def _start_run(checkout: Path, config: Path, home: Path) -> asyncio.subprocess.Process:
    from bench.e2e import _DRAINS, READY, _drain

    env = _environment(checkout) | {"COMMONOS_HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run", "--config", str(config), cwd=checkout,
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert process.stderr is not None
    async with asyncio.timeout(60):
        while READY not in (line := (await process.stderr.readline()).decode()):
            if not line:
                raise RuntimeError(f"commonos run in {checkout} exited before it was ready")
    _DRAINS.add(asyncio.get_running_loop().create_task(_drain(process)))
    return process


async def answers_cost(checkout: Path, chats: int, messages: int) -> dict[str, float]:
    """CPU seconds per answer of ``commonos run`` in ``checkout``, and its RSS at ready."""
    from bench.e2e import _answer, _chat
    from tests.platform_sim.telegram_sim import TelegramSim
    from tests.support.model_server import ScriptedModelServer

    ids = [30_000 + n for n in range(chats)]
    sim = TelegramSim()
    await sim.start()
    model = await ScriptedModelServer().start()
    model.script(*[_answer(0.0)] * (chats * messages + 1))
    process = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            config = _run_config(home, sim, model.url, [29_999, *ids])
            process = await _start_run(checkout, config, home)
            rss = _proc(process.pid, "VmRSS")
            await _chat(sim, 29_999, 1, False)
            cpu = _cpu_seconds(process.pid)
            await asyncio.gather(*(_chat(sim, c, messages, False) for c in ids))
            spent = _cpu_seconds(process.pid) - cpu
            return {"cpu": spent / (chats * messages), "rss": rss}
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 10)
        await model.stop()
        await sim.stop()


def _row(
    name: str, before: float, after: float, unit: str, digits: int, change: float | None = None
) -> str:
    if change is None:
        change = (after - before) / before * 100 if before else float("nan")
    return f"  {name:40s} {before:10.{digits}f} {after:10.{digits}f} {change:+7.1f} %  {unit}"


async def measure(checkouts: dict[str, Path]) -> None:
    """Every figure for both checkouts, printed side by side."""
    print(f"\nissue 29 edges: before {checkouts['before']}  after {checkouts['after']}")
    traces = {
        (side, case): traced_in(path, *case) for case in CASES for side, path in checkouts.items()
    }
    for side in checkouts:
        print(f"  {side} core: {traces[side, CASES[0]]['core']}")
    print(f"  {'':40s} {'before':>10s} {'after':>10s} {'change':>9s}")
    for platform, streaming in CASES:
        for what in ("modules", "functions", "entries", "switches"):
            before = traces["before", (platform, streaming)][what]
            after = traces["after", (platform, streaming)][what]
            print(_row(f"{platform} streaming {streaming}: {what}", before, after, "", 0))
    for chats, messages in ((1, 10), (20, 5)):
        runs = await _alternating(checkouts, chats, messages)
        name = f"CPU per answer, {chats} chat(s) x {messages}"
        cpu = _median(runs, "cpu")
        print(_row(name, cpu["before"] * 1000, cpu["after"] * 1000, "ms", 2, _paired(runs, "cpu")))
        print(f"  {'':40s} each round: {_changes(runs, 'cpu')}")
        if chats == 1:
            rss = _median(runs, "rss")
            print(_row("RSS at ready", rss["before"], rss["after"], "MiB", 1))


ROUNDS = 5
"""Rounds per cost figure: in each, one run of each side."""

Runs = dict[str, list[dict[str, float]]]
"""Each side's runs, one a round, in round order."""


async def _alternating(checkouts: dict[str, Path], chats: int, messages: int) -> Runs:
    """:data:`ROUNDS` rounds of one run of each side, back to back (which goes first
    alternates)."""
    runs: Runs = {side: [] for side in checkouts}
    for round_ in range(ROUNDS):
        order = list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts))
        for side in order:
            runs[side].append(await answers_cost(checkouts[side], chats, messages))
    return runs


def _median(runs: Runs, key: str) -> dict[str, float]:
    return {side: statistics.median(run[key] for run in found) for side, found in runs.items()}


def _round_changes(runs: Runs, key: str) -> list[float]:
    """Each round's change of after against the before run of its round (%)."""
    pairs = zip(runs["before"], runs["after"], strict=True)
    return [(after[key] / before[key] - 1) * 100 for before, after in pairs]


def _paired(runs: Runs, key: str) -> float:
    return statistics.median(_round_changes(runs, key))


def _changes(runs: Runs, key: str) -> str:
    return " ".join(f"{change:+.1f} %" for change in _round_changes(runs, key))


BEFORE_COMMIT = "785ada9"
"""The commit issue 29 names as "before"."""


async def run(sizes: Sizes) -> None:
    if not (BEFORE / "core" / "__init__.py").exists() and not _add_before():
        print(f"\nedges: no before checkout at {BEFORE}")
        return
    await measure({"before": BEFORE, "after": AFTER})


def _add_before() -> bool:
    """Make the before checkout as a detached git worktree of this repository (False when
    git cannot: not a clone, or the commit is missing)."""
    add = ["git", "-C", str(AFTER), "worktree", "add", "--detach", str(BEFORE), BEFORE_COMMIT]
    made = subprocess.run(add, capture_output=True, text=True, check=False)
    if made.returncode != 0:
        print(f"edges: {' '.join(add)}: {made.stderr.strip()}")
    return made.returncode == 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["trace"]:
        _child_trace(sys.argv[2], sys.argv[3])
    else:
        asyncio.run(run(None))  # type: ignore[arg-type]
