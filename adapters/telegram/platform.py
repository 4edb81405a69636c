"""Telegram as a registered platform: its ``[telegram]`` section and its adapter factory.

Importing this module imports no SDK; python-telegram-bot is loaded when the factory runs,
without Telegram Passport's cryptography (:func:`passport_crypto_skipped`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from adapters.base import Adapter, StreamingMode
from adapters.config import GroupChatSection, HttpUrl, Listen, PositiveInt, choice, secret_field
from adapters.config_reader import Check
from adapters.platforms import AdapterContext, Platform
from adapters.telegram.limits import CHAT_BURST

TelegramMode = Literal["polling", "webhook"]


class TelegramSection(GroupChatSection):
    token: str = secret_field("COMMONOS_TELEGRAM_TOKEN", "")
    base_url: HttpUrl = "https://api.telegram.org/bot"
    base_file_url: HttpUrl = "https://api.telegram.org/file/bot"
    mode: Annotated[TelegramMode, Check(choice("polling", "webhook"))] = "polling"
    webhook_url: HttpUrl | None = None
    webhook_secret: str | None = secret_field("COMMONOS_TELEGRAM_WEBHOOK_SECRET")
    webhook_listen: Listen = "127.0.0.1:8443"
    streaming: Annotated[StreamingMode, Check(choice("native", "edit", "off"))] = "native"
    """An answer shown while it is written: ``native`` (the default) draws it as a message
    draft with a Stop button in private chats and edits one message in groups; ``edit``
    edits one message everywhere; ``off`` sends the reply when the turn ends
    (adapters/telegram/drafts.py, docs/architecture.md "Streaming")."""
    chat_burst: PositiveInt = CHAT_BURST
    """Messages (and drafts) one chat may get at once; then about one a second, as Telegram
    asks (a token bucket; a 429 is waited out for that chat alone)."""

    def problems(self) -> Iterator[tuple[str, str]]:
        yield from filter(None, [self.missing_secret("token")])
        if self.mode == "webhook":
            if self.webhook_url is None:
                yield "webhook_url", 'required when mode = "webhook"'
            yield from filter(None, [self.missing_secret("webhook_secret")])


@contextmanager
def passport_crypto_skipped() -> Iterator[None]:
    """While python-telegram-bot is first imported, ``cryptography`` cannot be.

    The SDK imports it (about 8 MB resident at ready: ``make bench ARGS=edges``, README
    "Benchmarks") only to decrypt Telegram Passport data, which this gateway never asks
    for, and treats it as not installed when its import fails. Once the SDK is loaded,
    ``cryptography`` imports as usual (an MCP client's JWTs). A process that has loaded
    either already is left as it is."""
    if "telegram" in sys.modules or "cryptography" in sys.modules:
        yield
        return
    sys.modules["cryptography"] = None  # type: ignore[assignment]  # its import fails
    try:
        yield
    finally:
        if "cryptography" in sys.modules and sys.modules["cryptography"] is None:
            del sys.modules["cryptography"]


def build(section: TelegramSection, context: AdapterContext) -> Adapter:
    from adapters.base import RateLimit
    from adapters.session_keys import KeyStrategy, key_rule

    with passport_crypto_skipped():
        from adapters.telegram.adapter import TelegramAdapter, TelegramSettings

    webhook = None
    if section.mode == "webhook":
        from adapters.telegram.webhook import WebhookSettings

        host, _, port = section.webhook_listen.rpartition(":")
        webhook = WebhookSettings(
            secret_token=section.webhook_secret or "",
            public_url=section.webhook_url or "",
            listen=host,
            port=int(port),
        )
    settings = TelegramSettings(
        base_url=section.base_url,
        base_file_url=section.base_file_url,
        commands=context.commands,
        webhook=webhook,
        streaming=section.streaming,
        chat_limit=RateLimit(1, 1.0, burst=section.chat_burst),
    )
    rule = key_rule(KeyStrategy(group=section.group_sessions))
    return TelegramAdapter(
        section.token,
        context.store,
        settings,
        key_rule=rule,
    )


def lease_credential(adapter: Adapter) -> str:
    """The credential that names this bot in a cluster's lease (adapters/platforms.py)."""
    from adapters.telegram.adapter import TelegramAdapter

    if not isinstance(adapter, TelegramAdapter):
        raise TypeError(f"not a telegram adapter: {adapter!r}")
    return str(adapter.bot.token)


PLATFORM = Platform("telegram", TelegramSection, build, lease_credential=lease_credential)
