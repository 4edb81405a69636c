"""Who may see which memory: privacy by construction.

Every decision derives from two facts the turn carries — its session key and its speaker
(``TurnScope.requested_by``, a platform-qualified identity) — and from the store:

* a **direct chat** (``…:dm:…``, a linked ``link:dm:<person>`` too) sees the speaker's
  *person* entries: those of every identity linked to theirs (``/link``), and the
  profile's;
* a **shared chat** (a group, a channel, a thread; any key that is not a DM) sees that
  chat's entries and the profile's, and the person entries of exactly those people who
  said ``/memory share on`` *in that chat* — nobody else's;
* no speaker (a run nobody asked for) sees no person's entries.

A child agent's key (``<parent>/child:…``) is its parent's chat with the same speaker, so
it sees what its parent sees and nothing more. A :class:`Viewer` is the complete list of
owners a turn may read (:attr:`Viewer.visible`) and the ones it may write or forget.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.store.base import Store
from core.store.memory import MemoryStore

CHILD_MARK = "/child:"


@dataclass(frozen=True, slots=True)
class Viewer:
    """What one turn (or one chat command) may see and change."""

    identity: str | None
    """The speaker (``telegram:42``); None: nobody."""
    identities: tuple[str, ...]
    """The speaker's linked identities (theirs first); empty without a speaker."""
    chat: str | None
    """The chat's owner (``chat:telegram:group:-100``); None in a direct chat."""
    visible: tuple[str, ...]
    """Every owner whose entries this turn may read."""
    off: bool = False
    """The speaker turned memory off: nothing is saved for them, nothing of theirs read."""

    @property
    def person_owners(self) -> tuple[str, ...]:
        return tuple(person_owner(i) for i in self.identities)

    @property
    def own_owners(self) -> tuple[str, ...]:
        """What the speaker may forget: their person entries, and this chat's."""
        return self.person_owners + ((self.chat,) if self.chat else ())

    def owner_for(self, scope: str) -> str | None:
        """Where ``memory_save`` writes: ``person`` the speaker's own identity; ``chat``
        this chat (in a direct chat, the person)."""
        if scope == "chat" and self.chat is not None:
            return self.chat
        return person_owner(self.identity) if self.identity else None


def person_owner(identity: str) -> str:
    return f"person:{identity}"


def profile_owner(profile: str) -> str:
    return f"profile:{profile}"


def base_key(session_key: str) -> str:
    """A child agent's key is its parent's."""
    return session_key.partition(CHILD_MARK)[0]


def chat_of(session_key: str, identity: str | None) -> str | None:
    """The chat owner of ``session_key``, None for a direct chat. A group key that ends
    with the speaker's user id (one session per member) names the group without it."""
    key = base_key(session_key)
    parts = key.split(":")
    if len(parts) < 3 or parts[1] == "dm":
        return None
    if identity is not None and len(parts) > 3:
        user = identity.partition(":")[2]
        if parts[-1] == user and parts[0] == identity.partition(":")[0]:
            key = ":".join(parts[:-1])
    return f"chat:{key}"


async def linked_identities(store: Store, identity: str) -> tuple[str, ...]:
    """``identity`` and every identity linked to the same person, ``identity`` first."""
    platform, _, user = identity.partition(":")
    person = await store.person_of(platform, user)
    if person is None:
        return (identity,)
    others = [f"{p}:{u}" for p, u in await store.identities_of(person)]
    return (identity, *(i for i in others if i != identity))


async def viewer_of(
    store: Store, memory: MemoryStore, session_key: str, identity: str | None, profile: str
) -> Viewer:
    """The :class:`Viewer` of a turn of ``session_key`` spoken by ``identity``."""
    chat = chat_of(session_key, identity)
    identities = await linked_identities(store, identity) if identity else ()
    settings = await memory.memory_settings(identities)
    off = any(setting == "off" for _, setting, _ in settings)
    visible: list[str] = [profile_owner(profile)]
    if chat is None:
        visible += [] if off else [person_owner(i) for i in identities]
    else:
        visible += [chat, *await _shared_in(store, memory, chat)]
    return Viewer(identity, identities, chat, tuple(dict.fromkeys(visible)), off)


async def _shared_in(store: Store, memory: MemoryStore, chat: str) -> list[str]:
    """The person owners of everyone who shared their memory in ``chat`` (with their
    linked identities), unless they turned memory off."""
    owners: list[str] = []
    for sharer in await memory.sharers_in(chat):
        identities = await linked_identities(store, sharer)
        settings = await memory.memory_settings(identities)
        if not any(setting == "off" for _, setting, _ in settings):
            owners += [person_owner(i) for i in identities]
    return owners
