"""One ``commonos run`` process of the cluster tests and benchmark, and the config every
process of a run reads (tests/cluster/harness.py, docs/cluster.md §11).

The config: the web chat off, ``[store] url`` = the run's database, ``[cluster]
lease_seconds = 2`` (renewed every 2/3 s), ``[progress] mode = "off"``, the scripted model
server, and the platform sections of the simulators (streaming off: an answer is one
message). :class:`Gateway` is a started process: its log read to the end, the signals a
test sends it (SIGKILL, SIGSTOP/SIGCONT) and its CPU time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEASE_SECONDS = 2.0
TIMEOUT = 30.0
READY = "ready: the gateway is running"


# the configuration ----------------------------------------------------------------------------
def cluster_config(
    url: str, model_url: str, sections: str, *, lease_seconds: float = LEASE_SECONDS
) -> str:
    """The one config file every process of a test reads (TOML text)."""
    return f"""
[gateway]
log_level = "INFO"

[web]
enabled = false

[store]
url = "{url}"

[cluster]
lease_seconds = {lease_seconds}

[model]
provider = "openai"
base_url = "{model_url}"
api_key = "test"
model = "scripted"

[progress]
mode = "off"
{sections}
"""


def telegram_section(sim: Any, users: Iterable[int]) -> str:
    """``[telegram]`` for the Telegram simulator ``sim``, ``users`` allowed."""
    allowed = ", ".join(str(user) for user in users)
    return f"""
[telegram]
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{allowed}]
streaming = "off"
"""


def discord_section(sim: Any, users: Iterable[str]) -> str:
    allowed = ", ".join(f'"{user}"' for user in users)
    return f"""
[discord]
token = "{sim.token}"
api_base = "{sim.api_base}"
gateway_url = "{sim.gateway_url}"
allowed_users = [{allowed}]
streaming = "off"
"""


def slack_section(sim: Any, users: Iterable[str]) -> str:
    allowed = ", ".join(f'"{user}"' for user in users)
    return f"""
[slack]
bot_token = "{sim.bot_token}"
app_token = "{sim.app_token}"
api_base_url = "{sim.api_url}"
allowed_users = [{allowed}]
streaming = "off"
"""


def environment(home: Path) -> dict[str, str]:
    """This process's environment without proxies and COMMONOS_/OPENAI_ settings."""
    keep = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    keep = {k: v for k, v in keep.items() if not k.startswith(("COMMONOS_", "OPENAI_"))}
    return {**keep, "COMMONOS_HOME": str(home)}


# one process ----------------------------------------------------------------------------------
@dataclass
class Gateway:
    """One ``commonos run`` process: its log (stderr, read to the end), signals, CPU."""

    name: str
    home: Path
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    process_id: str = ""
    """Its cluster process id (``processes.id``), known once it joined."""
    paused: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    @property
    def log(self) -> str:
        return "".join(self.lines)

    async def drain(self) -> None:
        """Read stderr to the end, so a chatty log never blocks the process."""
        assert self.process.stderr is not None
        while raw := await self.process.stderr.readline():
            self.lines.append(raw.decode(errors="replace"))
            self.changed.set()
        self.changed.set()

    async def wait_for_line(self, needle: str, timeout: float = TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            while not any(needle in line for line in self.lines):
                if self.process.returncode is not None:
                    raise AssertionError(f"gateway {self.name} exited:\n{self.log}")
                self.changed.clear()
                await self.changed.wait()

    def kill(self) -> float:
        """SIGKILL; returns the wall-clock moment (comparable with the server's times)."""
        at = time.time()
        self.process.kill()
        return at

    def pause(self) -> float:
        at = time.time()
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True
        return at

    def resume(self) -> float:
        self.process.send_signal(signal.SIGCONT)
        self.paused = False
        return time.time()

    def cpu_seconds(self) -> float:
        """utime + stime of the process so far (``/proc/<pid>/stat``)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
