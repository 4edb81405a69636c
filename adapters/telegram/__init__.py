"""Telegram adapter (python-telegram-bot): long polling or webhook, durable inbox.

Importing the package is cheap (the config loader reads ``platform.py``); the names below
load python-telegram-bot on first use.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "CommandMenu": "adapters.telegram.adapter",
    "TelegramAdapter": "adapters.telegram.adapter",
    "TelegramSettings": "adapters.telegram.adapter",
    "default_session_key": "adapters.telegram.normalize",
    "PollSettings": "adapters.telegram.polling",
    "WebhookSettings": "adapters.telegram.webhook",
    "SessionKeyRule": "adapters.session_keys",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
