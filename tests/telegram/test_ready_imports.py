"""A Telegram-only gateway at ready has imported nothing of the features and platforms that
are off (issue 29: RSS at ready; "a feature that is off costs nothing").

The gateway is composed by the real wiring (config file → :class:`gateway.app.Gateway` →
``start()``) in a fresh interpreter against the Telegram simulator (run by the test, so the
simulator's own ``aiohttp.web`` is not in the gateway's ``sys.modules``); the interpreter
prints which of the modules below it holds once started.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.platform_sim.telegram_sim import TelegramSim
from tests.platform_sim.telegram_types import ALICE

OFF = (
    "discord",  # [discord] not configured
    "slack_bolt",  # [slack] not configured
    "slack_sdk",
    "adapters.web.adapter",  # [web] enabled = false
    "gateway.web.dashboard",
    "gateway.web.health",
    "gateway.web.metrics",  # nothing serves /metrics: no metrics are kept
    "prometheus_client",
    "aiohttp.web",  # no web chat, Telegram polls (its webhook server is aiohttp.web)
    "adapters.telegram.webhook",
    "opentelemetry.sdk",  # no OTLP endpoint
    "mcp",  # no [mcp] servers
    "croniter",  # [schedule] off
    "trafilatura",  # no profile names a web tool
    "asyncpg",  # SQLite store: no cluster, no PostgreSQL
    "gateway.cluster.leases",
    "yaml",  # no hook folder holds a HOOK.yaml
    "importlib.metadata",  # no installed package declares commonos.hooks
    "telegram.ext",  # the adapter's bot is a plain telegram.Bot
    "pydantic",  # the config is read by adapters/config_reader.py
    "click",  # httpx's command line (gateway/__init__.py)
)

STARTED = """
import asyncio, json, sys
from pathlib import Path
from gateway.app import Gateway
from gateway.config import load_config

async def main() -> None:
    gateway = Gateway(load_config(Path(sys.argv[1]), env={}))
    await gateway.start()
    try:
        print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
    finally:
        await gateway.stop()

asyncio.run(main())
"""


def _config(home: Path, sim: TelegramSim) -> Path:
    path = home / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{home / "data"}"\n\n[web]\nenabled = false\n\n'
        f'[telegram]\ntoken = "{sim.token}"\nbase_url = "{sim.url}/bot"\n'
        f'base_file_url = "{sim.url}/file/bot"\nallowed_users = [{ALICE.id}]\n'
    )
    return path


async def test_a_telegram_only_gateway_at_ready_imports_nothing_of_what_is_off(
    tmp_path: Path,
) -> None:
    sim = TelegramSim()
    await sim.start()
    try:
        env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
        env = {k: v for k, v in env.items() if not k.startswith(("COMMONOS_", "OPENAI_"))}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", STARTED, str(_config(tmp_path, sim)), json.dumps(OFF),
            env={**env, "COMMONOS_HOME": str(tmp_path)}, cwd=Path(__file__).parents[2],
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await process.communicate()
    finally:
        await sim.stop()
    assert process.returncode == 0, err.decode()[-3000:]
    assert json.loads(out.decode().strip().splitlines()[-1]) == []
