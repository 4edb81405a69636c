"""Interactions: button presses rebuilt from their custom_id, and deferred responders.

:class:`ButtonPress` is a ``DynamicItem`` matching every custom_id we send: its state is
the custom_id itself (``ap:<approval id>:a``, a progress message's Stop ``st:<id>`` …),
never an object of this process, so a press on a card sent before a restart reaches the
running adapter like any other. Each
press is deferred at once (a deferred update, well inside Discord's 3 s); the gateway's
answer then goes out as an ephemeral follow-up, seen only by the presser.

A slash command is deferred ("thinking…") the same way. While the gateway handles it,
its :class:`Responder` is open for its chat (:class:`DeferredResponses`): the first
message the gateway sends to that chat replaces the deferred response; later ones, and any
once the interaction token is near its 15-minute end, are ordinary channel messages. A
command that sent nothing has its "thinking…" response deleted. (Keyed by chat, not by
task context: the gateway's outbound scheduler makes every call from its own tasks.)
Should Discord refuse the token anyway (Invalid Webhook Token, Unknown Webhook, or the
response deleted), the message goes out as an ordinary one too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import discord

from adapters.base import ButtonRole, ButtonRows

_log = logging.getLogger(__name__)

BUTTON_PAYLOAD_LIMIT = 100
"""Characters of a custom_id."""
TOKEN_LIFETIME = 15 * 60 - 60
"""Seconds an interaction token is used for (Discord's 15 minutes, less a margin)."""


class PressHandler(Protocol):
    async def on_press(self, interaction: discord.Interaction, custom_id: str) -> None: ...


class ButtonPress(
    discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"(?P<data>[\s\S]{1,100})"
):
    def __init__(
        self,
        data: str,
        label: str = "",
        style: discord.ButtonStyle = discord.ButtonStyle.secondary,
        row: int | None = None,
    ) -> None:
        button: discord.ui.Button[Any] = discord.ui.Button(
            label=label or data, custom_id=data, style=style
        )
        super().__init__(button, row=row)
        self.data = data

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: Any
    ) -> ButtonPress:
        return cls(match["data"])

    async def callback(self, interaction: discord.Interaction) -> None:
        handler = getattr(interaction.client, "press_handler", None)
        if handler is None:
            await interaction.response.defer()
            return
        await handler.on_press(interaction, self.data)


@dataclass(slots=True)
class Responder:
    interaction: discord.Interaction
    created: float
    lifetime: float = TOKEN_LIFETIME
    used: bool = False
    closed: bool = False
    gone: bool = False
    """Discord refused the token (expired early, or the response was deleted)."""

    def expired(self) -> bool:
        return self.gone or time.monotonic() - self.created > self.lifetime

    def claim(self, chat_id: str) -> bool:
        """True (once) when a message to ``chat_id`` may replace the deferred response."""
        if self.used or self.closed or self.expired():
            return False
        if str(self.interaction.channel_id) != chat_id:
            return False
        self.used = True
        return True

    def expire(self) -> None:
        """The token stopped working: messages go out as ordinary ones from now on."""
        self.gone, self.used = True, False

    async def close(self) -> None:
        """The command was handled: nothing replaces the response from now on; an
        unused "thinking…" response is deleted (while the token still works)."""
        self.closed = True
        if self.used or self.expired():
            return
        try:
            await self.interaction.delete_original_response()
        except discord.DiscordException as exc:
            _log.info("discord: deferred response %s not deleted: %s", self.interaction.id, exc)


class DeferredResponses:
    """The deferred responses of the slash commands being handled now, by chat."""

    def __init__(self) -> None:
        self.open: dict[str, list[Responder]] = {}
        """The open responders by chat: empty while no slash command is being handled, so
        a sender need not :meth:`claim`."""

    @contextlib.asynccontextmanager
    async def handling(self, responder: Responder) -> AsyncIterator[None]:
        """Open ``responder`` for its chat while the command is handled; close it after
        (its "thinking…" response is deleted if nothing replaced it)."""
        chat = str(responder.interaction.channel_id)
        self.open.setdefault(chat, []).append(responder)
        try:
            yield
        finally:
            waiting = self.open.get(chat, [])
            waiting.remove(responder)
            if not waiting:
                self.open.pop(chat, None)
            await responder.close()

    def claim(self, chat_id: str) -> Responder | None:
        """The responder whose deferred response a message to ``chat_id`` replaces."""
        open_here = self.open.get(chat_id)
        if not open_here:
            return None
        return next((r for r in open_here if r.claim(chat_id)), None)


BUTTON_STYLES: dict[ButtonRole, discord.ButtonStyle] = {
    "approve": discord.ButtonStyle.success,
    "always": discord.ButtonStyle.success,
    "deny": discord.ButtonStyle.danger,
    "stop": discord.ButtonStyle.danger,
    "choice": discord.ButtonStyle.secondary,
}
"""A button's colour by its role: approve green, deny and Stop red, a choice grey."""


def view_of(buttons: ButtonRows) -> discord.ui.View | None:
    """Buttons as a view of :class:`ButtonPress` items (``None``: no buttons)."""
    if not any(buttons):
        return None
    view = discord.ui.View(timeout=None)
    for row_index, row in enumerate(buttons):
        for button in row:
            if len(button.data) > BUTTON_PAYLOAD_LIMIT:
                raise ValueError(
                    f"button {button.label!r}: payload is {len(button.data)} characters, "
                    f"Discord allows {BUTTON_PAYLOAD_LIMIT}"
                )
            style = BUTTON_STYLES[button.role]
            view.add_item(ButtonPress(button.data, button.label[:80], style, row=row_index))
    return view
