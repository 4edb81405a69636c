"""Pairing (gateway/inbound/pairing.py, docs/pairing.md) on a real SQLite store and a test clock:
codes, their limits, who may approve, wrong codes per user, the CLI's approvals seen by
the gateway's sync."""

from __future__ import annotations

import hashlib
import re

from adapters.base import ChatRef
from core.store.sqlite import SqliteStore
from gateway.control.access import AccessControl, AccessPolicy
from gateway.inbound.pairing import (
    ALPHABET,
    NOT_OWNER,
    TOO_MANY_PENDING,
    WRONG_CODE,
    YOU_ARE_IN,
    Pairing,
    PairingSettings,
    approve_code,
    new_code,
)
from tests.gateway.fakes import FakeClock, Person, event

OWNER, OTHER_OWNER = Person("1", "Olive"), Person("2", "Oscar")
FRIEND = Person("5", "Fran")  # allowed by the config, not an owner
STRANGER, SECOND = Person("7", "Sam"), Person("8", "Sue")
CODE = re.compile(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}")


class Told:
    def __init__(self) -> None:
        self.notices: list[tuple[ChatRef, str]] = []

    async def __call__(self, chat: ChatRef, text: str) -> bool:
        self.notices.append((chat, text))
        return True


def policy(**changes: object) -> AccessPolicy:
    values: dict[str, object] = {
        "allowed_users": frozenset({"5"}), "approvers": frozenset({"2"}),
        "owners": frozenset({"1"}), "pairing": True, "pairing_ttl": 3600.0,
    }  # fmt: skip
    values.update(changes)
    return AccessPolicy(**values)  # type: ignore[arg-type]


def pairing(
    store: SqliteStore, clock: FakeClock, told: Told | None = None, **settings: object
) -> Pairing:
    return Pairing(
        store, {"fake": policy()}, settings=PairingSettings(**settings),  # type: ignore[arg-type]
        clock=clock, sleep=clock.sleep, notify=told or Told(),
    )  # fmt: skip


async def ask(pairs: Pairing, who: Person, text: str = "hi", **where: object) -> str | None:
    verdict, reply = await pairs.screen(event(who, text, chat_id=f"dm{who.id}", **where), "deny")  # type: ignore[arg-type]
    assert verdict == "deny"
    return reply


def code_in(reply: str | None) -> str:
    assert reply is not None
    found = CODE.search(reply)
    assert found is not None, reply
    return found.group(0)


async def approve(pairs: Pairing, who: Person, code: str) -> str | None:
    return await pairs.command(event(who, f"/pair approve {code}"), "fake:dm:x", f"approve {code}")


def test_codes_are_8_random_characters_of_an_unambiguous_alphabet() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    assert all(len(code) == 8 and set(code) <= set(ALPHABET) for code in codes)
    assert not set("0O1I") & set(ALPHABET)


async def test_a_strangers_dm_gets_a_code_stored_only_hashed(store: SqliteStore) -> None:
    clock = FakeClock()
    reply = await ask(pairing(store, clock), STRANGER)
    code = code_in(reply)
    [stored] = await store.pairing_codes("fake")
    plain = code.replace("-", "")
    assert stored.code_hash == hashlib.sha256(plain.encode()).hexdigest()
    assert (stored.user_id, stored.chat_id, stored.name) == ("7", "dm7", "Sam")
    assert stored.expires_at == clock.now + 3600
    assert "60 minutes" in str(reply)


async def test_a_re_ask_within_the_refresh_interval_gets_the_same_code(
    store: SqliteStore,
) -> None:
    clock = FakeClock()
    pairs = pairing(store, clock, refresh_seconds=600)
    first = code_in(await ask(pairs, STRANGER))
    clock.now += 599
    again = await ask(pairs, STRANGER, "/start")
    assert code_in(again) == first and "still" in str(again)
    assert len(await store.pairing_codes()) == 1
    clock.now += 2
    renewed = code_in(await ask(pairs, STRANGER))
    assert renewed != first
    [stored] = await store.pairing_codes()
    assert stored.created_at == clock.now  # the new code replaced the old one


async def test_after_a_restart_a_re_ask_is_told_to_wait_not_given_a_new_code(
    store: SqliteStore,
) -> None:
    clock = FakeClock()
    code_in(await ask(pairing(store, clock), STRANGER))
    clock.now += 60
    reply = await ask(pairing(store, clock), STRANGER)
    assert reply is not None and CODE.search(reply) is None and "9 minutes" in reply
    assert len(await store.pairing_codes()) == 1


async def test_groups_never_pair(store: SqliteStore) -> None:
    pairs = pairing(store, FakeClock())
    verdict, reply = await pairs.screen(
        event(STRANGER, "hi", chat_type="group", chat_id="-5", mentioned=True), "deny"
    )
    assert (verdict, reply) == ("deny", None)
    assert await store.pairing_codes() == []


async def test_pairing_off_gives_no_code(store: SqliteStore) -> None:
    pairs = Pairing(store, {"fake": policy(pairing=False)}, clock=FakeClock())
    assert await pairs.screen(event(STRANGER, "hi"), "deny") == ("deny", None)
    assert await store.pairing_codes() == []


async def test_pending_codes_are_bounded_per_platform(store: SqliteStore) -> None:
    clock = FakeClock()
    pairs = pairing(store, clock, max_pending=2)
    code_in(await ask(pairs, STRANGER))
    code_in(await ask(pairs, SECOND))
    assert await ask(pairs, Person("9", "Third")) == TOO_MANY_PENDING
    clock.now += 3601  # the two expire: room again
    code_in(await ask(pairs, Person("9", "Third")))


async def test_an_owner_approves_and_the_user_is_told_and_admitted(store: SqliteStore) -> None:
    clock, told = FakeClock(), Told()
    pairs = pairing(store, clock, told)
    code = code_in(await ask(pairs, STRANGER))
    access = AccessControl({"fake": policy()}, pairs.is_paired)
    assert access.check(event(STRANGER, "hi")) == "deny"
    answer = await approve(pairs, OWNER, code.lower().replace("-", " "))
    assert answer == "✅ Sam (fake:7) is in; I told them."
    assert told.notices == [(ChatRef("fake", "dm7"), YOU_ARE_IN)]
    assert access.check(event(STRANGER, "hi")) == "admit"
    [user] = await store.paired_users("fake")
    assert (user.user_id, user.paired_by, user.announced) == ("7", "fake:1", True)
    assert await store.pairing_codes() == []
    assert await approve(pairs, OTHER_OWNER, code) == WRONG_CODE  # a code is used once


async def test_only_owners_and_approvers_may_pair(store: SqliteStore) -> None:
    pairs = pairing(store, FakeClock())
    code = code_in(await ask(pairs, STRANGER))
    for verb in (f"approve {code}", "list", "revoke 7", "nonsense"):
        assert await pairs.command(event(FRIEND, f"/pair {verb}"), "k", verb) == NOT_OWNER
    assert len(await store.pairing_codes()) == 1
    assert (await approve(pairs, OTHER_OWNER, code) or "").startswith("✅")  # an approver


async def test_wrong_codes_are_limited_per_user_never_per_platform(store: SqliteStore) -> None:
    clock = FakeClock()
    pairs = pairing(store, clock, wrong_limit=5, wrong_window=900)
    code = code_in(await ask(pairs, STRANGER))
    answers = [await approve(pairs, OTHER_OWNER, "ZZZZ-ZZZZ") for _ in range(100)]
    assert answers[:5] == [WRONG_CODE] * 5
    assert all("Too many wrong codes from you" in str(a) for a in answers[5:])
    assert "Too many" in str(await approve(pairs, OTHER_OWNER, code))  # they wait, even so
    second = code_in(await ask(pairs, SECOND))  # others still get codes ...
    assert str(await approve(pairs, OWNER, code)).startswith("✅")  # ... and are approved
    assert str(await approve(pairs, OWNER, second)).startswith("✅")
    clock.now += 901
    assert await approve(pairs, OTHER_OWNER, "ZZZZ-ZZZZ") == WRONG_CODE  # their wait is over


async def test_an_expired_code_does_nothing_and_says_so(store: SqliteStore) -> None:
    clock, told = FakeClock(), Told()
    pairs = pairing(store, clock, told)
    code = code_in(await ask(pairs, STRANGER))
    clock.now += 3601
    answer = await approve(pairs, OWNER, code)
    assert answer is not None and "expired" in answer
    assert await store.paired_users() == [] and told.notices == []
    assert not pairs.is_paired("fake", "7")


async def test_list_shows_who_waits_and_who_is_paired_never_the_codes(
    store: SqliteStore,
) -> None:
    pairs = pairing(store, FakeClock())
    first = code_in(await ask(pairs, STRANGER))
    second = code_in(await ask(pairs, SECOND))
    await approve(pairs, OWNER, first)
    listed = str(await pairs.command(event(OWNER, "/pair list"), "k", "list"))
    assert "fake:8 Sue (expires in 60 minutes)" in listed
    assert "fake:7 Sam (by fake:1)" in listed
    assert first not in listed and second not in listed


async def test_revoke_removes_a_paired_user(store: SqliteStore) -> None:
    pairs = pairing(store, FakeClock())
    await approve(pairs, OWNER, code_in(await ask(pairs, STRANGER)))
    assert await pairs.command(event(OWNER, "/pair revoke fake:7"), "k", "revoke fake:7") == (
        "fake:7 is no longer paired."
    )
    assert not pairs.is_paired("fake", "7") and await store.paired_users() == []
    assert await pairs.command(event(OWNER, "/pair revoke 7"), "k", "revoke 7") == (
        "fake:7 is not paired."
    )


async def test_a_cli_approval_is_announced_by_the_gateways_sync(store: SqliteStore) -> None:
    clock, told = FakeClock(), Told()
    pairs = pairing(store, clock, told, sync_seconds=5)
    await pairs.start()
    code = code_in(await ask(pairs, STRANGER))
    approval = await approve_code(store, code, "cli", clock())  # as `commonos pair approve`
    assert approval.outcome == "approved" and not pairs.is_paired("fake", "7")
    await pairs.sync()
    assert pairs.is_paired("fake", "7")
    assert told.notices == [(ChatRef("fake", "dm7"), YOU_ARE_IN)]
    [user] = await store.paired_users()
    assert user.announced
    await pairs.aclose()


async def test_an_approval_whose_chat_is_unknown_is_told_at_the_next_message(
    store: SqliteStore,
) -> None:
    clock = FakeClock()
    code = code_in(await ask(pairing(store, clock), STRANGER))
    await approve_code(store, code, "cli", clock())  # the gateway was down
    restarted = Pairing(store, {"fake": policy()}, clock=clock, notify=None)
    await restarted.start()
    assert restarted.is_paired("fake", "7")
    assert await restarted.screen(event(STRANGER, "hello"), "admit") == ("admit", YOU_ARE_IN)
    assert await restarted.screen(event(STRANGER, "again"), "admit") == ("admit", None)
    [user] = await store.paired_users()
    assert user.announced


async def test_a_stranger_approved_by_the_cli_since_the_last_sync_is_let_in(
    store: SqliteStore,
) -> None:
    clock = FakeClock()
    pairs = pairing(store, clock)
    code = code_in(await ask(pairs, STRANGER))
    await approve_code(store, code, "cli", clock())
    assert await pairs.screen(event(STRANGER, "hi"), "deny") == ("admit", YOU_ARE_IN)


async def test_a_you_are_in_that_did_not_go_is_tried_once_then_said_at_their_message(
    store: SqliteStore,
) -> None:
    clock, tries = FakeClock(), []

    async def blocked(chat: ChatRef, text: str) -> bool:
        tries.append(text)
        return False

    pairs = Pairing(store, {"fake": policy()}, clock=clock, notify=blocked)
    code = code_in(await ask(pairs, STRANGER))
    await approve_code(store, code, "cli", clock())
    for _ in range(3):
        await pairs.sync()
    assert tries == [YOU_ARE_IN]
    assert await pairs.screen(event(STRANGER, "hello"), "admit") == ("admit", YOU_ARE_IN)
