"""Access control: who may talk to the agent, and which messages it answers.

Default deny: a platform with no allowlist admits nobody. Each unknown user is logged
once, with the line the operator needs to let them in. In groups the agent answers
plain text only when it is mentioned or replied to (``require_mention``) — forum topics
and threads included, they live in a group; DMs are always free. Commands and
button presses are addressed to it by nature.

Bots (README.md, "Bots in chats"): a message from a bot is ignored unless ``allow_bots``
lets it in — ``true`` every bot (each still needs ``allowed_users`` like anyone), a list
of bot ids just those (a listed bot is allowed to talk, no ``allowed_users`` entry needed),
``false`` (the default) none. The agent's own messages never get here: each adapter drops
them. The bots let in are then paced by :mod:`gateway.control.bot_guard`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from adapters.base import InboundEvent
from core.bounded import BoundedMap
from gateway.control.bot_guard import BotLimits
from gateway.inbound.stages import Next

logger = logging.getLogger(__name__)

Verdict = Literal["admit", "deny", "ignore"]
"""``deny``: a person we do not know (no turn; buttons get a refusal).
``ignore``: not meant for us (bot chatter, group text without a mention)."""

EVERYONE = "*"
REPORTED_CAPACITY = 1000
"""Unknown users remembered as already logged (least recently seen forgotten first)."""
SHARED_CHATS = ("group", "channel", "thread")
"""Where plain text must mention (or reply to) the bot: a forum topic is part of a group."""


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """One platform's rules (``allowed_users``/``require_mention`` in its config section)."""

    allowed_users: frozenset[str] = frozenset()
    """User ids allowed to talk; ``"*"`` allows everyone."""
    approvers: frozenset[str] = frozenset()
    """Approvers are always allowed to talk."""
    require_mention: bool = True
    allow_bots: bool | frozenset[str] = False
    """``True``: every bot; a set: those bot ids; ``False``: none."""
    bot_limits: BotLimits = field(default_factory=BotLimits)
    """How many exchanges a minute with one bot, and how long it is muted after."""
    pairing: bool = False
    """A stranger's DM gets a pairing code (docs/pairing.md)."""
    owners: frozenset[str] = frozenset()
    """Who may approve pairing codes here (with the approvers)."""
    pairing_ttl: float = 3600.0
    """Seconds a pairing code stays valid."""

    def allows(self, user_id: str) -> bool:
        allowed = self.allowed_users | self.approvers
        return EVERYONE in allowed or user_id in allowed

    def lets_in_bot(self, bot_id: str) -> bool:
        """Whether messages from the bot ``bot_id`` are read at all."""
        if isinstance(self.allow_bots, bool):
            return self.allow_bots
        return bot_id in self.allow_bots

    def named_bot(self, user_id: str) -> bool:
        """A bot listed by id in ``allow_bots``: allowed to talk as if in ``allowed_users``."""
        return not isinstance(self.allow_bots, bool) and user_id in self.allow_bots


def qualified(platform: str, user_id: str) -> str:
    """A user id that names its platform (``"telegram:42"``): the requester and the
    approvers of an approval are compared in this form, so the same numeric id on another
    platform is another person."""
    return f"{platform}:{user_id}"


def user_of(event: InboundEvent) -> str:
    """``event``'s sender, platform-qualified (as :func:`qualified` makes it)."""
    return f"{event.platform}:{event.sender.id}"


class AccessControl:
    """``paired(platform, user_id)``: users an owner let in from the chat
    (:mod:`gateway.inbound.pairing`), allowed like the configured ones."""

    def __init__(
        self,
        policies: Mapping[str, AccessPolicy],
        paired: Callable[[str, str], bool] = lambda platform, user_id: False,
    ) -> None:
        self._policies = dict(policies)
        self._paired = paired
        self._reported: BoundedMap[tuple[str, str], None] = BoundedMap(REPORTED_CAPACITY)

    def policy(self, platform: str) -> AccessPolicy:
        return self._policies.get(platform, AccessPolicy())

    def allows(self, platform: str, user_id: str) -> bool:
        """Whether ``user_id`` may use the bot on ``platform`` now (allowed or paired)."""
        return self.policy(platform).allows(user_id) or self._paired(platform, user_id)

    def check(self, event: InboundEvent) -> Verdict:
        policy = self.policy(event.platform)
        if event.sender.is_bot and not policy.lets_in_bot(event.sender.id):
            return "ignore"
        named = event.sender.is_bot and policy.named_bot(event.sender.id)
        allowed = policy.allows(event.sender.id) or self._paired(event.platform, event.sender.id)
        if not (named or allowed):
            self._report_unknown(event)
            return "deny"
        if _needs_mention(event) and policy.require_mention:
            return "ignore"
        return "admit"

    async def admit(self, event: InboundEvent, next: Next) -> None:
        """Stage ``access`` (pairing off): only an admitted event goes on; a stranger, bot
        chatter and a group message that does not mention the bot end here in silence."""
        if self.check(event) == "admit":
            await next(event)

    def _report_unknown(self, event: InboundEvent) -> None:
        who = (event.platform, event.sender.id)
        seen = who in self._reported
        self._reported.put(who, None)
        if seen:
            return
        logger.warning(
            "%s user %s (%s) is not allowed; to allow them add %r to [%s] allowed_users",
            event.platform,
            event.sender.id,
            event.sender.name,
            event.sender.id,
            event.platform,
        )


def _needs_mention(event: InboundEvent) -> bool:
    if event.kind != "text" or event.chat_type not in SHARED_CHATS:
        return False
    return not (event.mentioned or event.reply_to_bot)
