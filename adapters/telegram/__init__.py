"""Telegram adapter (python-telegram-bot): long polling or webhook, durable inbox."""

from adapters.session_keys import SessionKeyRule
from adapters.telegram.adapter import CommandMenu, TelegramAdapter, TelegramSettings
from adapters.telegram.inbox import UpdateSettleWait
from adapters.telegram.normalize import default_session_key
from adapters.telegram.polling import PollSettings
from adapters.telegram.webhook import WebhookSettings

__all__ = [
    "CommandMenu",
    "PollSettings",
    "SessionKeyRule",
    "TelegramAdapter",
    "TelegramSettings",
    "UpdateSettleWait",
    "WebhookSettings",
    "default_session_key",
]
