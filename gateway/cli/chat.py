"""``commonos chat``: the gateway with one platform, the terminal it runs in.

The same composition as ``commonos run`` (:class:`gateway.app.Gateway`: the configured
store, model, profiles, hooks, sandboxes), except that the only platform is the terminal
(:mod:`adapters.terminal`): no Telegram poller or web server competes with a gateway
already running on the same configuration. One session, ``terminal:dm:<user>``, for the
local user (the login name).

Ctrl-C is the adapter's :meth:`~adapters.terminal.TerminalAdapter.interrupt` (stop the
turn; twice, quit); SIGTERM quits. Logging goes to stderr from ``WARNING`` up (the chat is
the screen), or at the configured level when that is ``DEBUG``.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import signal
from dataclasses import replace
from pathlib import Path

from adapters.platforms import register, unregister
from adapters.terminal import PLATFORM, TerminalAdapter, TerminalSettings, local_user
from adapters.terminal.platform import platform_for, section_for
from gateway.app import Gateway
from gateway.config import Config
from gateway.turns.containment import protect_process

log = logging.getLogger(__name__)


def login_name() -> str:
    try:
        return local_user(getpass.getuser())
    except (KeyError, OSError):  # no login name and no passwd entry
        return "local"


def chat_config(config: Config, settings: TerminalSettings) -> Config:
    """``config`` with the terminal as its only platform."""
    return replace(config, sections={PLATFORM: section_for(settings)})


async def chat(config: Config, terminal: TerminalAdapter) -> None:
    """Run the gateway for ``terminal`` until the person quits (or SIGTERM)."""
    protect_process()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, terminal.interrupt)
    loop.add_signal_handler(signal.SIGTERM, terminal.close)
    register(platform_for(terminal))
    gateway = Gateway(chat_config(config, terminal.settings))
    try:
        await gateway.start()
        await terminal.closed.wait()
    finally:
        await gateway.stop()
        unregister(PLATFORM)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def chat_command(config_path: Path | None) -> int:
    """``commonos chat [--config PATH]``: exit codes as ``commonos run``'s."""
    from core.store.base import StoreError
    from gateway.app import StartupError
    from gateway.cli.console import configure_logging, fail
    from gateway.config import ConfigError, load_config, log_redaction

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        return fail(exc.errors)
    configure_logging("DEBUG" if config.gateway.log_level == "DEBUG" else "WARNING")
    log_redaction.install(config)
    terminal = TerminalAdapter(TerminalSettings(user=login_name()))
    try:
        asyncio.run(chat(config, terminal))
    except (StartupError, StoreError) as exc:
        return fail([str(exc)])
    except Exception:
        log.exception("the chat failed")
        return fail(["the chat failed unexpectedly (traceback above)"])
    return 0
