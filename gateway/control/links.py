"""One conversation across platforms: ``/link``, ``/link CODE``, ``/unlink`` (README
"One conversation across platforms", docs/architecture.md §7).

* ``/link`` in a direct chat gives the sender a one-time code: :data:`CODE_LENGTH`
  characters of an unambiguous alphabet from :mod:`secrets`, valid :data:`CODE_SECONDS`
  (10 minutes), stored by its sha256 only (:class:`core.store.base.LinkCode`), used once.
  A new ``/link`` replaces the identity's earlier code.
* ``/link CODE`` sent by an admitted user in a direct chat on *another* platform (or the
  web chat) proves the same person holds both identities (the code was shown only in the
  first one's own DM) and joins them as one *person* (the store's identity links); the
  chat that showed the code is told (when this run showed it). Wrong
  codes are counted per identity: after :data:`WRONG_CODES` within
  :data:`WRONG_WINDOW` seconds that identity's attempts are refused until the window
  passes (nobody else is affected).
* From then on every direct message of a linked identity belongs to the person's one
  session, ``link:dm:<person>`` (:func:`linked_key`): the inbound stage ``link_rekey``
  rekeys the event (:meth:`Links.rekeyed`) after the access check, so the history is shared, the
  dispatcher's per-key lane runs one turn at a time across the platforms, and ``/stop``
  from any of them stops it. Each turn answers in the chat its message came from
  (:meth:`gateway.outbound.directory.ChatDirectory.turn_place`). Groups, channels and threads are
  never linked. A linked session starts empty; each platform's own DM history is kept
  and is the conversation again after ``/unlink``.
* ``/unlink`` takes this identity out of its person (and dissolves a person left with
  one identity).

A linked session runs the gateway's default profile (a ``link`` key names no platform);
its approvers are the person's own identities, the configured approvers of their
platforms and the operators (:meth:`GatewayService._approvers_of`).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Literal

from adapters.base import ChatRef, InboundEvent, SessionKey
from core.bounded import BoundedMap
from core.store.base import LinkCode, Store
from gateway.control.access import qualified
from gateway.control.commands import Reply
from gateway.inbound.stages import Next

LINK_PLATFORM = "link"
"""The platform part of a linked session's key: ``link:dm:<person>``."""

CODE_LENGTH = 8
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
"""No 0/O, 1/I/L: a code read off one screen and typed on another."""
CODE_SECONDS = 600.0
WRONG_CODES = 5
WRONG_WINDOW = 600.0
CAPACITY = 10_000

DM_ONLY = "🔗 Only direct chats can be linked: send /link in a private chat with me."
NOT_VALID = "🔗 That link code is not valid. Send /link in your other chat for a new one."
EXPIRED = "🔗 That link code has expired. Send /link in your other chat for a new one."
OWN_CODE = "🔗 That code is this chat's own: send /link {code} from your chat on another platform."
TOO_MANY = "🔗 Too many wrong link codes. Try again in {minutes} minutes."
NOT_LINKED = "🔗 This chat is not linked to another platform."
UNLINKED = "🔓 Unlinked: this chat is its own conversation again."
LINKED_ELSEWHERE = "🔗 Your link code was used: this chat is now part of one conversation."

JoinResult = Literal["linked", "not_valid", "expired", "own_code", "same_platform", "too_many"]
Clock = Callable[[], float]
Notify = Callable[[ChatRef, str], Awaitable[object]]
"""Tell a chat something (the service's plain notice)."""


def linked_key(person: str) -> SessionKey:
    """The one session of a linked person's direct chats."""
    return SessionKey(LINK_PLATFORM, "dm", person)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def code_hash(code: str) -> str:
    """How a code is stored and looked up (sha256 hex of its canonical form)."""
    return hashlib.sha256(canonical_code(code).encode()).hexdigest()


def canonical_code(code: str) -> str:
    return "".join(code.split()).upper()


class Links:
    """Link codes, identity links and the rekeying of linked direct messages.

    ``clock`` is wall-clock seconds (codes are stored with their expiry). Every link is
    held in memory too (:meth:`load` reads them at start; links change only through this
    object, written to the store first), so routing a message asks the store nothing."""

    def __init__(
        self, store: Store, *, clock: Clock = time.time, notify: Notify | None = None
    ) -> None:
        self._store, self.clock, self.notify = store, clock, notify
        self._issued_in: BoundedMap[str, ChatRef] = BoundedMap(CAPACITY)
        """The chat each code of this run was shown in: told when its code is used."""
        self._persons: dict[str, str] = {}
        """Platform-qualified identity → person, for every linked identity."""
        self._wrong: BoundedMap[str, deque[float]] = BoundedMap(CAPACITY)

    async def load(self) -> None:
        """Read the stored links (at the gateway's start, before any message)."""
        links = await self._store.identity_links()
        self._persons = {qualified(p, user): person for p, user, person in links}

    # the session of an event ----------------------------------------------------------
    def rekey(self, event: InboundEvent) -> InboundEvent:
        """``event`` in its person's linked session when it is a linked identity's direct
        message; otherwise ``event`` itself (groups, channels and threads never change)."""
        if event.chat_type != "dm" or event.session_key.chat_type != "dm":
            return event
        person = self.person_of(event.platform, event.sender.id)
        if person is None:
            return event
        return replace(event, session_key=linked_key(person))

    @property
    def any(self) -> bool:
        """Whether some identity is linked (as of :meth:`load`)."""
        return bool(self._persons)

    async def rekeyed(self, event: InboundEvent, next: Next) -> None:
        """Stage ``link_rekey`` (after access, before ``record``): :meth:`rekey`."""
        await next(self.rekey(event))

    def person_of(self, platform: str, user_id: str) -> str | None:
        return self._persons.get(qualified(platform, user_id))

    def members(self, person: str) -> frozenset[str]:
        """The person's identities, platform-qualified."""
        return frozenset(i for i, p in self._persons.items() if p == person)

    # codes ----------------------------------------------------------------------------
    async def issue(self, platform: str, user_id: str, chat: ChatRef | None = None) -> str:
        """A new code for this identity (replacing its earlier one), shown in ``chat``."""
        code, now = new_code(), self.clock()
        stored = LinkCode(code_hash(code), platform, user_id, now, now + CODE_SECONDS)
        await self._store.put_link_code(stored)
        if chat is not None:
            self._issued_in.put(stored.code_hash, chat)
        return code

    async def join(self, platform: str, user_id: str, code: str) -> JoinResult:
        """Join this identity with the one that was given ``code``."""
        identity = qualified(platform, user_id)
        if self._refused(identity):
            return "too_many"
        taken = await self._store.take_link_code(code_hash(code))
        if taken is None:
            self._count_wrong(identity)
            return "not_valid"
        if taken.expires_at <= self.clock():
            return "expired"
        if taken.platform == platform:
            await self._store.put_link_code(taken)  # still theirs to use elsewhere
            return "own_code" if taken.user_id == user_id else "same_platform"
        await self._join(taken.platform, taken.user_id, platform, user_id)
        await self._tell_issuer(taken.code_hash)
        return "linked"

    async def _tell_issuer(self, hash_: str) -> None:
        """The chat that showed the code learns it was used (when this run showed it)."""
        chat = self._issued_in.pop(hash_, None)
        if chat is not None and self.notify is not None:
            await self.notify(chat, LINKED_ELSEWHERE)

    async def _join(self, first: str, first_user: str, platform: str, user_id: str) -> None:
        """``platform:user_id`` becomes the person of ``first:first_user`` (a new one when
        that identity had none); an identity the person had on ``platform`` is replaced."""
        person = self.person_of(first, first_user) or secrets.token_hex(8)
        await self._link(first, first_user, person)
        for member in self.members(person):
            other, _, other_user = member.partition(":")
            if other == platform and other_user != user_id:
                await self._forget(other, other_user)
        old = self.person_of(platform, user_id)
        await self._link(platform, user_id, person)
        if old is not None and old != person:
            await self._dissolve_if_alone(old)

    async def _link(self, platform: str, user_id: str, person: str) -> None:
        await self._store.link_identity(platform, user_id, person)
        self._persons[qualified(platform, user_id)] = person

    async def unlink(self, platform: str, user_id: str) -> bool:
        """Take this identity out of its person; False when it was not linked."""
        person = self.person_of(platform, user_id)
        if person is None:
            return False
        await self._forget(platform, user_id)
        await self._dissolve_if_alone(person)
        return True

    async def _forget(self, platform: str, user_id: str) -> None:
        await self._store.unlink_identity(platform, user_id)
        self._persons.pop(qualified(platform, user_id), None)

    async def _dissolve_if_alone(self, person: str) -> None:
        """A person left with one identity is no link: that identity is its own again."""
        left = self.members(person)
        if len(left) == 1:
            platform, _, user_id = next(iter(left)).partition(":")
            await self._forget(platform, user_id)

    def _refused(self, identity: str) -> bool:
        times = self._wrong.get(identity)
        if times is None:
            return False
        while times and times[0] <= self.clock() - WRONG_WINDOW:
            times.popleft()
        return len(times) >= WRONG_CODES

    def _count_wrong(self, identity: str) -> None:
        times = self._wrong.get(identity) or deque(maxlen=WRONG_CODES)
        times.append(self.clock())
        self._wrong.put(identity, times)

    def _minutes_left(self, identity: str) -> int:
        times = self._wrong.get(identity)
        oldest = times[0] if times else self.clock()
        return max(1, round((oldest + WRONG_WINDOW - self.clock()) / 60))

    # chat commands --------------------------------------------------------------------
    async def command_link(self, event: InboundEvent, session_key: str, args: str) -> Reply:
        """``/link`` (a code) or ``/link CODE`` (join)."""
        if event.chat_type != "dm":
            return DM_ONLY
        platform, user_id = event.platform, event.sender.id
        if not args:
            return issued(await self.issue(platform, user_id, event.chat))
        result = await self.join(platform, user_id, args)
        if result == "linked":
            return self._linked_reply(platform, user_id)
        return self._refusal(result, qualified(platform, user_id), args)

    async def command_unlink(self, event: InboundEvent, session_key: str, args: str) -> Reply:
        if event.chat_type != "dm" or not await self.unlink(event.platform, event.sender.id):
            return NOT_LINKED
        return UNLINKED

    def _linked_reply(self, platform: str, user_id: str) -> str:
        person = self.person_of(platform, user_id)
        places = sorted({m.partition(":")[0] for m in self.members(person or "")})
        return (
            f"🔗 Linked: your chats on {', '.join(places)} are now one conversation "
            "(it starts fresh; each answer goes to the chat you wrote in). /unlink separates "
            "them again."
        )

    def _refusal(self, result: JoinResult, identity: str, code: str) -> str:
        if result == "too_many":
            return TOO_MANY.format(minutes=self._minutes_left(identity))
        if result == "expired":
            return EXPIRED
        if result == "own_code":
            return OWN_CODE.format(code=canonical_code(code))
        if result == "same_platform":
            return "🔗 Link codes join chats on different platforms."
        return NOT_VALID


def issued(code: str) -> str:
    minutes = round(CODE_SECONDS / 60)
    return (
        f"🔗 Your link code: {code}\nSend /link {code} within {minutes} minutes from your "
        "private chat with me on another platform (or the web chat): both become one "
        "conversation."
    )
