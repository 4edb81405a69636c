"""``python -m bench path``: the code one plain Telegram message passes, traced at run time.

The real wiring (:class:`gateway.app.Gateway` from a config file, the real
python-telegram-bot) runs in this process against the Telegram simulator and the scripted
model server. One message warms everything up; the next one is traced with
``sys.setprofile`` from the moment the user sends it until its update is done in the inbox.

Counted (only functions of ``core``, ``adapters`` and ``gateway``, on the event loop's
thread; a resumed coroutine counts as the same function):

* modules and functions entered (a dataclass's generated methods are not counted);
* layer crossings: distinct caller → callee pairs whose layers differ (the caller is the
  nearest frame of ours below the callee).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from bench.sizes import Sizes
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text

LAYERS = ("core", "adapters", "gateway")
GENERATED = "__create_fn__"
"""dataclasses' generated ``__init__``/``__eq__``…: not functions anyone wrote or reads."""
CHAT = 4242
SETTLE_SECONDS = 10.0


class PathTrace:
    """What ``sys.setprofile`` saw of our code."""

    def __init__(self) -> None:
        self.functions: set[tuple[str, str]] = set()
        self.crossings: set[tuple[tuple[str, str], tuple[str, str]]] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _ours(frame)
        if callee is None:
            return
        self.functions.add(callee)
        caller = _nearest_ours(frame.f_back)
        if caller is not None and _layer(caller) != _layer(callee):
            self.crossings.add((caller, callee))

    @property
    def modules(self) -> set[str]:
        return {module for module, _ in self.functions}


def _ours(frame: FrameType) -> tuple[str, str] | None:
    module = frame.f_globals.get("__name__", "")
    if not isinstance(module, str) or module.split(".", 1)[0] not in LAYERS:
        return None
    name = frame.f_code.co_qualname
    if name.startswith(GENERATED):
        return None
    return module, name


def _nearest_ours(frame: FrameType | None) -> tuple[str, str] | None:
    while frame is not None:
        found = _ours(frame)
        if found is not None:
            return found
        frame = frame.f_back
    return None


def _layer(function: tuple[str, str]) -> str:
    return function[0].split(".", 1)[0]


def _config(home: Path, sim: TelegramSim, model_url: str) -> Path:
    path = home / "config.toml"
    path.write_text(
        f"""[gateway]
data_dir = "{home / "data"}"

[model]
provider = "openai"
base_url = "{model_url}"
api_key = "bench"
model = "scripted"

[web]
enabled = false

[telegram]
enabled = true
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{CHAT}]
"""
    )
    return path


async def _one_message(sim: TelegramSim, gateway: Any, text: str) -> None:
    await sim.user_says(CHAT, text)
    await sim.wait_for_bot_message(CHAT, lambda m: m.text == f"answer: {text}", 30)
    deadline = time.monotonic() + SETTLE_SECONDS
    while await gateway.store.unfinished_inbound("telegram"):
        if time.monotonic() > deadline:
            raise RuntimeError("the update was not done in time")
        await asyncio.sleep(0.005)


async def trace_one_message() -> PathTrace:
    from gateway.app import Gateway
    from gateway.config import load_config

    sim = TelegramSim()
    await sim.start()
    model = await ScriptedModelServer().start()
    model.script(reply_text("answer: warm up"), reply_text("answer: traced"))
    gateway = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            gateway = Gateway(load_config(_config(home, sim, model.url), env={}))
            await gateway.start()
            await _one_message(sim, gateway, "warm up")
            trace = PathTrace()
            sys.setprofile(trace)
            try:
                await _one_message(sim, gateway, "traced")
            finally:
                sys.setprofile(None)
            await gateway.stop()
            gateway = None
            return trace
    finally:
        if gateway is not None:
            await gateway.stop()
        await model.stop()
        await sim.stop()


def report(trace: PathTrace) -> None:
    per_layer = Counter(_layer(f) for f in trace.functions)
    modules = Counter(module.split(".", 1)[0] for module in trace.modules)
    print("\none plain Telegram message, traced through the real wiring")
    print(f"  modules entered      {len(trace.modules):5d}   {dict(modules)}")
    print(f"  functions entered    {len(trace.functions):5d}   {dict(per_layer)}")
    print(f"  layer crossings      {len(trace.crossings):5d}   (distinct caller -> callee)")


async def run(sizes: Sizes) -> None:
    logging.getLogger().setLevel(logging.ERROR)
    report(await trace_one_message())


if __name__ == "__main__":
    trace = asyncio.run(trace_one_message())
    report(trace)
    if "-v" in sys.argv:
        for module in sorted(trace.modules):
            print("   ", module)
