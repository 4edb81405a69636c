"""Where each session lives: the chat (and bot) a session key's replies go to.

The router records every admitted event here; the reply sender, the progress view and the
approval cards look a session key up to know where to write. It also remembers which
approval cards each session was shown, so a stale short id typed later can be told apart
from one never asked there. Entries are small and keyed by session key, user id and
approval id, bounded by ``capacity`` (oldest forgotten first).

A turn answers where its message came from, not wherever its session spoke last (a
linked session, :mod:`gateway.control.links`, lives in several chats): each recorded event's
chat is remembered by its origin (:func:`origin_of`), and while a turn runs its chat is
*the* place of its session key (:meth:`ChatDirectory.turn_place`) for the reply, the
progress view, approval cards and files.

It is also the one way out: each attached adapter gets its bot's
:class:`gateway.outbound.pipeline.Outbound`, built once (its scheduler: one send budget with
priorities, the one retry layer; then redaction, so each text sent or edited into a chat
— replies, progress, approval cards, notices, button answers and labels — passes
:func:`core.redaction.redact`; then the traffic counters), and every event that comes in
passes :meth:`ChatDirectory.received` before it is routed.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import Adapter, ChatRef, InboundEvent
from core.bounded import BoundedMap
from gateway.outbound.pipeline import Outbound, Relay, Traffic

DEFAULT_CAPACITY = 10_000


@dataclass(frozen=True, slots=True)
class Place:
    outbound: Outbound
    chat: ChatRef


def origin_of(event: InboundEvent) -> str:
    """``"<platform>:<update id>"``: how a message names the update it came from."""
    return f"{event.platform}:{event.update_id}"


class ChatDirectory:
    def __init__(
        self,
        adapters: list[Adapter],
        *,
        capacity: int = DEFAULT_CAPACITY,
        traffic: Traffic | None = None,
    ) -> None:
        self._traffic = traffic
        self._bots: dict[str, Outbound] = {}
        for adapter in adapters:
            self.add(adapter)
        self._places: BoundedMap[str, ChatRef] = BoundedMap(capacity)
        self._names: BoundedMap[str, str] = BoundedMap(capacity)
        self._asked: BoundedMap[str, str] = BoundedMap(capacity)
        self._origins: BoundedMap[str, ChatRef] = BoundedMap(capacity)
        self._turns: dict[str, ChatRef] = {}
        """The running turns' chats, each dropped at :meth:`turn_ended` (as many as run)."""

    def add(self, adapter: Adapter, relay: Relay | None = None) -> None:
        """``relay``: the cluster's stage of a leased bot (:mod:`gateway.outbound.pipeline`)."""
        self._bots[adapter.platform] = Outbound.paced(adapter, self._traffic, relay)

    def outbound(self, platform: str) -> Outbound | None:
        """``platform``'s bot: the way every call into its chats goes."""
        return self._bots.get(platform)

    def adapter(self, platform: str) -> Adapter | None:
        """``platform``'s adapter itself (its lifecycle and health; never for sending)."""
        bot = self._bots.get(platform)
        return None if bot is None else bot.adapter

    @property
    def bots(self) -> list[Outbound]:
        return list(self._bots.values())

    @property
    def adapters(self) -> list[Adapter]:
        return [bot.adapter for bot in self._bots.values()]

    def received(self, event: InboundEvent) -> None:
        """``event`` came in: its bot's scheduler learns the chat's kind, it is counted."""
        bot = self._bots.get(event.platform)
        if bot is not None:
            bot.received(event)

    def record(self, event: InboundEvent) -> None:
        """Remember where ``event``'s session lives and what its sender is called."""
        self._places.put(str(event.session_key), event.chat)
        self._origins.put(origin_of(event), event.chat)
        self._names.put(f"{event.platform}:{event.sender.id}", event.sender.name)

    def remember_sender(self, event: InboundEvent) -> None:
        """Remember what ``event``'s sender is called (as :meth:`record` does)."""
        self._names.put(f"{event.platform}:{event.sender.id}", event.sender.name)

    def expect(self, origin: str, session_key: str, chat: ChatRef) -> None:
        """A message that came from no platform update (a scheduled turn, ``origin``) runs
        in ``session_key`` (a child key: its parent's chat) and answers in ``chat``."""
        self._origins.put(origin, chat)
        self._places.put(session_key.partition("/child:")[0], chat)

    def place(self, session_key: str) -> Place | None:
        """Where ``session_key`` lives (its running turn's chat, else where it spoke last);
        a child agent's key maps to its parent's chat."""
        key = session_key.partition("/child:")[0]
        chat = self._turns.get(key) or self._places.get(key)
        if chat is None or (bot := self._bots.get(chat.platform)) is None:
            return None
        return Place(bot, chat)

    def turn_place(self, session_key: str, origin: str | None) -> Place | None:
        """Where a turn of ``session_key`` started by the message from ``origin`` answers:
        that update's chat (else the session's latest); it is the session's place until
        :meth:`turn_ended`."""
        chat = (self._origins.get(origin) if origin else None) or self._places.get(session_key)
        if chat is None:
            return None
        self._turns[session_key] = chat
        bot = self._bots.get(chat.platform)
        return None if bot is None else Place(bot, chat)

    def turn_ended(self, session_key: str) -> None:
        self._turns.pop(session_key, None)

    def name_of(self, platform: str, user_id: str | None) -> str:
        """The display name of a user seen on ``platform`` (the id when unknown).

        ``user_id`` may be platform-qualified (``"telegram:42"``, see
        :func:`gateway.control.access.qualified`); its own platform then wins."""
        if user_id is None:
            return "someone"
        own, _, bare = user_id.partition(":")
        if bare and own in self._bots:
            platform, user_id = own, bare
        return self._names.get(f"{platform}:{user_id}", user_id)

    def remember_approval(self, session_key: str, approval_id: str) -> None:
        """``session_key`` (a child agent's: its parent's) was shown ``approval_id``'s card."""
        parent = session_key.partition("/child:")[0]
        self._asked.put(approval_id, parent)

    def approvals_in(self, session_key: str) -> list[str]:
        """Ids of the approval cards ``session_key`` was shown (as remembered)."""
        return [i for i, key in self._asked.items() if key == session_key]
