"""What Telegram counts, and how fast it lets a bot go (core.telegram.org/bots/faq): the
rate windows and charges of :class:`adapters.telegram.adapter.TelegramSettings`, and the
chat burst the ``[telegram]`` section sets (:mod:`adapters.telegram.platform`). No SDK is
imported here: the section reads its default without loading python-telegram-bot.
"""

from __future__ import annotations

from adapters.base import MESSAGES, Charges, RateLimit

CHAT_BURST = 6
"""Messages a chat may get at once before the one-a-second pace (``[telegram] chat_burst``)."""

BOT_LIMIT = RateLimit(30, 1.0)
CHAT_LIMIT = RateLimit(1, 1.0, burst=CHAT_BURST)
"""About one message a second in a chat, short bursts allowed (core.telegram.org/bots/faq):
a token bucket of ``[telegram] chat_burst`` messages refilled one a second."""
GROUP_LIMIT = RateLimit(20, 60.0)
TELEGRAM_CHARGES = Charges(
    bot=MESSAGES | {"live"},
    chat=frozenset({"send", "live"}),
    group=frozenset({"send", "edit"}),
)
"""What Telegram counts (core.telegram.org/bots/faq): messages. A chat's ~1 a second counts
new messages and drafts (``sendMessageDraft``, "live"), a group's 20 a minute counts edits
too, the bot's 30 a second counts every message call (deletes and drafts included, to be
safe). Button answers (``answerCallbackQuery``), typing (``sendChatAction``) and status
reactions (``setMessageReaction``) are not messages: no window counts them."""
