"""Pairing: a stranger's DM gets a one-time code; an owner lets them in (docs/pairing.md).

With ``pairing = true`` in a platform's section, an unknown user who writes to the bot in a
DM gets a code (:func:`new_code`: 8 characters from ``secrets`` over an alphabet without
0/O/1/I, shown ``ABCD-EFGH``). Nothing they send reaches the model: no turn, no history.
Groups never pair (a stranger there stays ignored, as before).

* The code is stored hashed (sha256) with its user, chat and expiry (``pairing_ttl``,
  default :data:`gateway.inbound.pairing_codes.DEFAULT_TTL`); the plain code lives only in the
  process that issued it, so a re-ask within :attr:`PairingSettings.refresh_seconds` gets
  the same code again (a reminder), never a new one; after that a new code replaces the old.
* At most :attr:`PairingSettings.max_pending` live codes per platform; past that a stranger
  is told to try later (no code).
* An owner (the section's ``owners``, its approvers, or a dashboard operator) approves with
  ``/pair approve CODE`` (any chat of theirs), on the dashboard, or ``commonos pair approve
  CODE``; ``/pair list`` and ``/pair revoke USER``. Anyone else's ``/pair`` is refused with
  one line that reveals nothing.
* Wrong codes are counted per user who typed them (:class:`WrongCodes`): past
  :attr:`PairingSettings.wrong_limit` in :attr:`PairingSettings.wrong_window` seconds that
  user alone waits; nobody else's pairing is ever blocked.
* Paired users are kept in the store (``paired_users``) and admitted by
  :class:`gateway.control.access.AccessControl` alongside the config allowlist. The new user is
  told they are in at once when approved from the chat or the dashboard; an approval by
  the CLI (another process on the same store) is seen by the gateway's own check every
  :attr:`PairingSettings.sync_seconds` (and at start), which tells them then — or, when
  their chat is unknown, at their next message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from adapters.base import ChatRef, InboundEvent
from core.store.base import PairedUser, PairingCode, Store
from gateway.control.access import AccessControl, AccessPolicy, Verdict, qualified, user_of
from gateway.inbound.pairing_codes import ALPHABET as ALPHABET
from gateway.inbound.pairing_codes import (
    KEEP_EXPIRED,
    Clock,
    WrongCodes,
    hash_code,
    is_code_shaped,
    shown,
)
from gateway.inbound.pairing_codes import PairingSettings as PairingSettings
from gateway.inbound.pairing_codes import new_code as new_code
from gateway.inbound.stages import Next

logger = logging.getLogger(__name__)

DEFAULT_SETTINGS = PairingSettings()

Sleep = Callable[[float], Awaitable[None]]
Notify = Callable[[ChatRef, str], Awaitable[bool]]
"""Send a short notice to a chat; False when it could not go."""
Reply = str | None

YOU_ARE_IN = "✅ You're in — an owner approved you. Send me a message to start."
NOT_OWNER = "Sorry — only an owner of this bot can use /pair."
WRONG_CODE = "No pending request has that code. Nothing changed."
PAIR_USAGE = "Usage: /pair approve CODE | /pair list | /pair revoke USER"
TOO_MANY_PENDING = "Sorry — too many people are waiting for approval right now. Try again later."


# messages ----------------------------------------------------------------------------
def minutes(seconds: float) -> str:
    count = max(1, round(seconds / 60))
    return f"{count} minute{'' if count == 1 else 's'}"


def code_message(code: str, ttl: float, *, again: bool = False) -> str:
    lead = "Your pairing code is still" if again else "Hi! I don't know you yet. Your pairing code:"
    return (
        f"{lead} {shown(code)} (valid {minutes(ttl)}). Ask the bot's owner to approve it: "
        f"/pair approve {shown(code)} in their chat with me, or on the dashboard."
    )


def wait_message(left: float) -> str:
    return (
        "I sent you a pairing code earlier; ask the bot's owner to approve it. "
        f"A new code can be asked in {minutes(left)}."
    )


def expired_message(code: PairingCode) -> str:
    return (
        f"That code has expired ({code.platform} user {code.user_id}). Nothing changed; "
        "they get a new one by writing to me again."
    )


def approved_message(user: PairedUser, told: bool) -> str:
    who = f"{user.name} ({user.platform}:{user.user_id})"
    return f"✅ {who} is in{'; I told them' if told else ''}."


# approving (shared by the chat, the dashboard and the CLI) ---------------------------
@dataclass(frozen=True, slots=True)
class Approval:
    """What an approve did: ``approved`` (``user`` paired, ``chat`` where to tell them),
    ``wrong`` (no such code, or not one this approver may approve), ``expired``."""

    outcome: str
    user: PairedUser | None = None
    chat: ChatRef | None = None
    code: PairingCode | None = None


async def approve_code(
    store: Store,
    text: str,
    by: str,
    now: float,
    may_approve: Callable[[str], bool] = lambda platform: True,
) -> Approval:
    """Pair the user whose code ``text`` is, approved by ``by`` (platform-qualified, or
    ``"cli"``). A code of a platform ``by`` may not approve is a wrong code (it reveals
    nothing); an expired one is removed and reported expired."""
    if not is_code_shaped(text):
        return Approval("wrong")
    digest = hash_code(text)
    found = [c for c in await store.pairing_codes() if c.code_hash == digest]
    if not found or not may_approve(found[0].platform):
        return Approval("wrong")
    code = await store.take_pairing_code(digest)
    if code is None:
        return Approval("wrong")
    if code.expires_at <= now:
        return Approval("expired", code=code)
    user = PairedUser(code.platform, code.user_id, code.name, paired_at=now, paired_by=by)
    await store.pair_user(user)
    logger.info("%s user %s (%s) paired by %s", user.platform, user.user_id, user.name, by)
    return Approval("approved", user=user, chat=ChatRef(code.platform, code.chat_id), code=code)


def parse_user(text: str, platform: str) -> tuple[str, str] | None:
    """``telegram:42`` or a bare ``42`` (on ``platform``) as ``(platform, user id)``."""
    text = text.strip()
    if not text:
        return None
    named, sep, user = text.partition(":")
    return (named, user) if sep and user else (platform, text)


def listing(codes: list[PairingCode], users: list[PairedUser], now: float) -> str:
    """``/pair list`` and ``commonos pair list``: pending requests (never their codes:
    only the stranger has those) and paired users."""
    lines = ["Waiting for approval:" if codes else "Nobody is waiting for approval."]
    for code in codes:
        left = code.expires_at - now
        state = f"expires in {minutes(left)}" if left > 0 else "expired"
        lines.append(f"  {code.platform}:{code.user_id} {code.name} ({state})")
    lines.append("Paired:" if users else "Nobody is paired yet.")
    for user in users:
        lines.append(f"  {user.platform}:{user.user_id} {user.name} (by {user.paired_by})")
    return "\n".join(lines)


def too_many_wrong(wait: float) -> str:
    return f"Too many wrong codes from you — try again in {minutes(wait)}."


# the gateway's side ------------------------------------------------------------------
@dataclass(slots=True)
class Issued:
    code: str
    record: PairingCode


class Pairing:
    """Strangers' codes, ``/pair``, and who is paired (for :class:`AccessControl`)."""

    def __init__(
        self,
        store: Store,
        policies: Mapping[str, AccessPolicy],
        *,
        operators: frozenset[str] = frozenset(),
        settings: PairingSettings = DEFAULT_SETTINGS,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        notify: Notify | None = None,
    ) -> None:
        self._store, self._policies, self._operators = store, dict(policies), operators
        self.settings, self._clock, self._sleep = settings, clock, sleep
        self.notify = notify
        """How a new user is told they are in (the service sets it)."""
        self.wrong = WrongCodes(settings, clock)
        self._paired: set[tuple[str, str]] = set()
        self._unannounced: set[tuple[str, str]] = set()
        self._chats: dict[tuple[str, str], ChatRef] = {}
        self._issued: dict[tuple[str, str], Issued] = {}
        self.waiting: dict[tuple[str, str], PairingCode] = {}
        """The pending requests as of the last sync or code (the dashboard shows them)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return any(policy.pairing for policy in self._policies.values())

    def is_paired(self, platform: str, user_id: str) -> bool:
        return (platform, user_id) in self._paired

    def owns(self, by: str, platform: str) -> bool:
        """Whether ``by`` (platform-qualified) may approve ``platform``'s codes."""
        if by in self._operators:
            return True
        policy = self._policies.get(platform)
        if policy is None:
            return False
        owners = policy.owners | policy.approvers
        return any(qualified(platform, owner) == by for owner in owners)

    async def admit(self, access: AccessControl, event: InboundEvent, next: Next) -> None:
        """Stage ``access_pairing`` (pairing on somewhere; ``partial(pairing.admit,
        access)``): the access check, then :meth:`screen` — a stranger's DM gets its code,
        a user paired since is told they are in; only an admitted event goes on."""
        verdict, notice = await self.screen(event, access.check(event))
        if notice and self.notify is not None:
            await self.notify(event.chat, notice)
        if verdict == "admit":
            await next(event)

    # lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Read who is paired, tell those approved while the gateway was down, and check
        the store every ``sync_seconds`` for ``commonos pair`` changes."""
        await self.sync()
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._watch(), name="pairing-sync")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _watch(self) -> None:
        while True:
            await self._sleep(self.settings.sync_seconds)
            try:
                await self.sync()
            except Exception:
                logger.warning("pairing: reading the store failed; next try later", exc_info=True)

    async def sync(self) -> None:
        """The store is the truth (the CLI writes it too): who is paired, where the
        pending strangers' chats are, and tell the newly paired whose chat is known."""
        users = await self._store.paired_users()
        self._paired = {(user.platform, user.user_id) for user in users}
        codes = await self._store.pairing_codes()
        for code in codes:
            self._chats[(code.platform, code.user_id)] = ChatRef(code.platform, code.chat_id)
        self.waiting = {(code.platform, code.user_id): code for code in codes}
        await self._store.drop_pairing_codes(self._clock() - KEEP_EXPIRED)
        for user in users:  # tried once each: one that did not go waits for their message
            if not user.announced and (user.platform, user.user_id) not in self._unannounced:
                await self._announce(user, self._chats.get((user.platform, user.user_id)))

    async def _announce(self, user: PairedUser, chat: ChatRef | None) -> bool:
        """Tell ``user`` they are in; when their chat is unknown (or the notice did not
        go) they are told at their next message instead."""
        who = (user.platform, user.user_id)
        self._paired.add(who)
        self._issued.pop(who, None)
        self.waiting.pop(who, None)
        told = chat is not None and self.notify is not None and await self.notify(chat, YOU_ARE_IN)
        if told:
            await self._store.mark_paired_announced(*who)
            self._unannounced.discard(who)
        else:
            self._unannounced.add(who)
        return told

    # the access stage's screen -------------------------------------------------------
    async def screen(self, event: InboundEvent, verdict: Verdict) -> tuple[Verdict, Reply]:
        """Asked after the access check: a paired user's first message after an
        approval the gateway could not announce carries the "you're in" notice; a
        stranger's DM with pairing on gets their code (and stays denied)."""
        who = (event.platform, event.sender.id)
        if verdict == "admit" and who in self._unannounced:
            self._unannounced.discard(who)
            await self._store.mark_paired_announced(*who)
            return "admit", YOU_ARE_IN
        if verdict != "deny" or not self._pairs(event):
            return verdict, None
        if await self._paired_since(event):
            await self._store.mark_paired_announced(*who)
            return "admit", YOU_ARE_IN
        return "deny", await self._code_for(event)

    def _pairs(self, event: InboundEvent) -> bool:
        policy = self._policies.get(event.platform)
        dm = event.chat_type == "dm" and event.kind in ("text", "command")
        return policy is not None and policy.pairing and dm and not event.sender.is_bot

    async def _paired_since(self, event: InboundEvent) -> bool:
        """Approved by ``commonos pair`` since the last sync: admitted at once."""
        users = await self._store.paired_users(event.platform)
        if not any(user.user_id == event.sender.id for user in users):
            return False
        self._paired.add((event.platform, event.sender.id))
        return True

    async def _code_for(self, event: InboundEvent) -> str:
        who, now = (event.platform, event.sender.id), self._clock()
        live = [c for c in await self._store.pairing_codes(event.platform) if c.expires_at > now]
        own = next((c for c in live if c.user_id == event.sender.id), None)
        ttl = self._policies[event.platform].pairing_ttl
        if own is not None and now - own.created_at < self.settings.refresh_seconds:
            issued = self._issued.get(who)
            if issued is not None and issued.record.code_hash == own.code_hash:
                return code_message(issued.code, own.expires_at - now, again=True)
            return wait_message(own.created_at + self.settings.refresh_seconds - now)
        others = [c for c in live if c.user_id != event.sender.id]
        if len(others) >= self.settings.max_pending:
            logger.warning("%s: %d pairing codes pending; no new one", event.platform, len(others))
            return TOO_MANY_PENDING
        return await self._issue(event, now, ttl)

    async def _issue(self, event: InboundEvent, now: float, ttl: float) -> str:
        code = new_code()
        record = PairingCode(
            hash_code(code), event.platform, event.sender.id, event.sender.name,
            event.chat.chat_id, created_at=now, expires_at=now + ttl,
        )  # fmt: skip
        await self._store.put_pairing_code(record)
        who = (event.platform, event.sender.id)
        self._issued = {k: v for k, v in self._issued.items() if v.record.expires_at > now}
        self._issued[who], self._chats[who] = Issued(code, record), event.chat
        self.waiting[who] = record
        logger.warning(
            "%s user %s (%s) asked to pair; an owner approves with /pair approve CODE "
            "(or `commonos pair list`)",
            event.platform, event.sender.id, event.sender.name,
        )  # fmt: skip
        return code_message(code, ttl)

    # /pair ---------------------------------------------------------------------------
    async def command(self, event: InboundEvent, session_key: str, args: str) -> Reply:
        """``/pair approve CODE | list | revoke USER`` (owners only)."""
        by = user_of(event)
        if not self.owns_any(by):
            return NOT_OWNER
        verb, _, rest = args.strip().partition(" ")
        if verb == "approve" and rest.strip():
            return await self.approve(rest, by)
        if verb == "list" and not rest.strip():
            return await self.list_for(by)
        if verb == "revoke" and rest.strip():
            return await self.revoke(rest, by, event.platform)
        return PAIR_USAGE

    def owns_any(self, by: str) -> bool:
        """Whether ``by`` may use /pair at all (an owner somewhere, or an operator)."""
        return any(self.owns(by, platform) for platform in self._policies) or by in self._operators

    async def approve(self, text: str, by: str) -> str:
        """Approve the code ``text`` as ``by``; wrong codes count against ``by`` only."""
        wait = self.wrong.wait(by)
        if wait > 0:
            return too_many_wrong(wait)
        approval = await approve_code(
            self._store, text, by, self._clock(), lambda platform: self.owns(by, platform)
        )
        if approval.outcome == "wrong":
            self.wrong.add(by)
            return WRONG_CODE
        if approval.outcome == "expired":
            assert approval.code is not None
            self.waiting.pop((approval.code.platform, approval.code.user_id), None)
            return expired_message(approval.code)
        assert approval.user is not None
        told = await self._announce(approval.user, approval.chat)
        return approved_message(approval.user, told)

    async def list_for(self, by: str) -> str:
        codes = [c for c in await self._store.pairing_codes() if self.owns(by, c.platform)]
        users = [u for u in await self._store.paired_users() if self.owns(by, u.platform)]
        return listing(codes, users, self._clock())

    async def revoke(self, text: str, by: str, platform: str) -> str:
        target = parse_user(text, platform)
        if target is None or not self.owns(by, target[0]):
            return f"{text.strip()} is not paired."
        removed = await self._store.unpair_user(*target)
        self._paired.discard(target)
        self._unannounced.discard(target)
        name = f"{target[0]}:{target[1]}"
        if not removed:
            return f"{name} is not paired."
        policy = self._policies.get(target[0])
        still = policy is not None and policy.allows(target[1])
        return f"{name} is no longer paired." + (
            " They are still allowed by the config (allowed_users)." if still else ""
        )
