"""python-telegram-bot clients of the Telegram simulator (tests/platform_sim/telegram_sim.py)."""

from __future__ import annotations

import functools
import ssl

from telegram import Bot
from telegram.request import HTTPXRequest

from tests.platform_sim.telegram_sim import TelegramSim


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every test client: httpx otherwise loads the system's certificates
    for each client it makes (about 50 ms of CPU), though the simulator speaks plain HTTP."""
    return ssl.create_default_context()


def plain_http() -> HTTPXRequest:
    """PTB's own request class, as a Bot makes by default, with the shared TLS context."""
    return HTTPXRequest(httpx_kwargs={"verify": _tls()})


def sim_bot(sim: TelegramSim, token: str | None = None) -> Bot:
    """A Bot of the simulator (``token``: another bot's), its files served by it too."""
    return Bot(
        token or sim.token,
        base_url=f"{sim.url}/bot",
        base_file_url=f"{sim.url}/file/bot",
        request=plain_http(),
        get_updates_request=plain_http(),
    )
