"""Where each session lives: the chat (and adapter) a session key's replies go to.

The router records every admitted event here; the reply sender, the progress view and the
approval cards look a session key up to know where to write. It also remembers which
approval cards each session was shown, so a stale short id typed later can be told apart
from one never asked there. Entries are small and keyed by session key, user id and
approval id, bounded by ``capacity`` (oldest forgotten first).

It is also the one way out: every adapter it hands out is wrapped in
:class:`RedactedAdapter` behind its bot's :class:`gateway.outbound.ScheduledAdapter` (one
send budget with priorities, the one retry layer), so each text sent or edited into a
chat — replies, progress, approval cards, notices, button answers and labels — passes
:func:`core.redaction.redact` (the exact configured secret values, in every encoding it
knows, and nothing else) on its way to the platform.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from adapters.base import (
    Adapter,
    ButtonRows,
    Capabilities,
    ChatRef,
    EventSink,
    InboundEvent,
    SentMessage,
)
from adapters.health import Health
from core.bounded import BoundedMap
from core.redaction import redact
from gateway.outbound import ScheduledAdapter

DEFAULT_CAPACITY = 10_000


@dataclass(frozen=True, slots=True)
class Place:
    adapter: Adapter
    chat: ChatRef


class RedactedAdapter:
    """An :class:`Adapter` whose outbound texts (and button labels) are redacted before the
    platform sees them, plain or in the platform's markup alike (the reply was also
    redacted as Markdown before it was rendered, see :mod:`gateway.delivery`)."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.platform: str = inner.platform
        self.capabilities: Capabilities = inner.capabilities

    @property
    def health(self) -> Health:
        return self.inner.health

    async def start(self, sink: EventSink) -> None:
        await self.inner.start(sink)

    async def stop(self) -> None:
        await self.inner.stop()

    async def send(
        self, chat: ChatRef, text: str, *, buttons: ButtonRows = (), markup: bool = True
    ) -> SentMessage:
        clean, rows = redact(text), _clean_buttons(buttons)
        return await self.inner.send(chat, clean, buttons=rows, markup=markup)

    async def edit(
        self, message: SentMessage, text: str, *, buttons: ButtonRows = (), markup: bool = True
    ) -> None:
        clean, rows = redact(text), _clean_buttons(buttons)
        await self.inner.edit(message, clean, buttons=rows, markup=markup)

    async def delete(self, message: SentMessage) -> None:
        await self.inner.delete(message)

    async def answer_button(self, event: InboundEvent, text: str | None = None) -> None:
        await self.inner.answer_button(event, None if text is None else redact(text))

    async def typing(self, chat: ChatRef) -> None:
        await self.inner.typing(chat)


def _clean_buttons(rows: ButtonRows) -> ButtonRows:
    if not rows:
        return rows
    return tuple(tuple(replace(b, label=redact(b.label)) for b in row) for row in rows)


def redacted(adapter: Adapter) -> Adapter:
    """``adapter`` behind the outbound redactor (once: a wrapped adapter is kept)."""
    return adapter if isinstance(adapter, RedactedAdapter) else RedactedAdapter(adapter)


def outbound(adapter: Adapter) -> Adapter:
    """``adapter`` behind the redactor and then its bot's outbound scheduler (once)."""
    if isinstance(adapter, ScheduledAdapter):
        return adapter
    return ScheduledAdapter(redacted(adapter))


class ChatDirectory:
    def __init__(self, adapters: list[Adapter], *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._adapters = {adapter.platform: outbound(adapter) for adapter in adapters}
        self._places: BoundedMap[str, ChatRef] = BoundedMap(capacity)
        self._names: BoundedMap[str, str] = BoundedMap(capacity)
        self._asked: BoundedMap[str, str] = BoundedMap(capacity)

    def add(self, adapter: Adapter) -> None:
        self._adapters[adapter.platform] = outbound(adapter)

    def adapter(self, platform: str) -> Adapter | None:
        return self._adapters.get(platform)

    @property
    def adapters(self) -> list[Adapter]:
        return list(self._adapters.values())

    def record(self, event: InboundEvent) -> None:
        """Remember where ``event``'s session lives and what its sender is called."""
        self._places.put(str(event.session_key), event.chat)
        self.remember_sender(event)

    def remember_sender(self, event: InboundEvent) -> None:
        user = f"{event.platform}:{event.sender.id}"
        self._names.put(user, event.sender.name)

    def place(self, session_key: str) -> Place | None:
        """Where ``session_key`` lives; a child agent's key maps to its parent's chat."""
        chat = self._places.get(session_key.partition("/child:")[0])
        if chat is None:
            return None
        adapter = self._adapters.get(chat.platform)
        return None if adapter is None else Place(adapter, chat)

    def name_of(self, platform: str, user_id: str | None) -> str:
        """The display name of a user seen on ``platform`` (the id when unknown).

        ``user_id`` may be platform-qualified (``"telegram:42"``, see
        :func:`gateway.access.qualified`); its own platform then wins."""
        if user_id is None:
            return "someone"
        own, _, bare = user_id.partition(":")
        if bare and own in self._adapters:
            platform, user_id = own, bare
        return self._names.get(f"{platform}:{user_id}", user_id)

    def remember_approval(self, session_key: str, approval_id: str) -> None:
        """``session_key`` (a child agent's: its parent's) was shown ``approval_id``'s card."""
        parent = session_key.partition("/child:")[0]
        self._asked.put(approval_id, parent)

    def approvals_in(self, session_key: str) -> list[str]:
        """Ids of the approval cards ``session_key`` was shown (as remembered)."""
        return [i for i, key in self._asked.items() if key == session_key]
