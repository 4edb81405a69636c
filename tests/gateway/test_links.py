"""``/link``, ``/link CODE``, ``/unlink`` (gateway/control/links.py): codes, identity links, the
rekeying of linked direct messages, and a linked session through the real router and
service on two fake platforms (``fake`` and ``other``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.sqlite import SqliteStore, open_store
from gateway.control.links import (
    CODE_ALPHABET,
    CODE_LENGTH,
    CODE_SECONDS,
    WRONG_CODES,
    WRONG_WINDOW,
    Links,
    code_hash,
    linked_key,
)
from tests.gateway.fakes import FakeAdapter, Step, event
from tests.gateway.harness import ALICE, BOB, MALLORY, GatewayFactory


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "links.db")
    yield opened
    await opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def links(store: SqliteStore, clock: Clock) -> Links:
    return Links(store, clock=clock)


async def test_a_code_is_random_unambiguous_and_stored_only_by_its_hash(
    links: Links, store: SqliteStore
) -> None:
    codes = [await links.issue("fake", "1") for _ in range(20)]
    assert len(set(codes)) == 20
    assert all(len(c) == CODE_LENGTH and set(c) <= set(CODE_ALPHABET) for c in codes)
    assert not set(CODE_ALPHABET) & set("01OIL")
    taken = await store.take_link_code(code_hash(codes[-1]))
    assert taken is not None and taken.code_hash != codes[-1]
    assert taken.expires_at - taken.created_at == CODE_SECONDS


async def test_a_new_code_replaces_the_earlier_one(links: Links) -> None:
    first, second = await links.issue("fake", "1"), await links.issue("fake", "1")
    assert await links.join("other", "9", first) == "not_valid"
    assert await links.join("other", "9", second) == "linked"


async def test_the_code_joins_two_platforms_into_one_person(links: Links) -> None:
    code = await links.issue("fake", "1")
    assert await links.join("other", "9", code.lower()) == "linked"  # typed in lower case
    person = links.person_of("fake", "1")
    assert person is not None and person == links.person_of("other", "9")
    assert links.members(person) == {"fake:1", "other:9"}


async def test_a_code_works_once(links: Links) -> None:
    code = await links.issue("fake", "1")
    assert await links.join("other", "9", code) == "linked"
    assert await links.join("third", "5", code) == "not_valid"


async def test_an_expired_code_does_nothing_and_says_so(links: Links, clock: Clock) -> None:
    code = await links.issue("fake", "1")
    clock.now += CODE_SECONDS
    assert await links.join("other", "9", code) == "expired"
    assert links.person_of("other", "9") is None
    assert links.person_of("fake", "1") is None


async def test_a_code_from_the_same_platform_links_nothing_and_stays_usable(
    links: Links,
) -> None:
    code = await links.issue("fake", "1")
    assert await links.join("fake", "1", code) == "own_code"
    assert await links.join("fake", "2", code) == "same_platform"
    assert await links.join("other", "9", code) == "linked"


async def test_wrong_codes_are_limited_per_identity_never_for_everyone(
    links: Links, clock: Clock
) -> None:
    for _ in range(WRONG_CODES):
        assert await links.join("other", "666", "WRONGCODE") == "not_valid"
    code = await links.issue("fake", "1")
    assert await links.join("other", "666", code) == "too_many"  # even the right one
    assert await links.join("other", "9", code) == "linked"  # someone else is not blocked
    clock.now += WRONG_WINDOW
    assert await links.join("other", "666", "WRONGCODE") == "not_valid"


async def test_unlink_separates_and_dissolves_a_person_left_alone(links: Links) -> None:
    code = await links.issue("fake", "1")
    await links.join("other", "9", code)
    assert await links.unlink("other", "9")
    assert links.person_of("other", "9") is None
    assert links.person_of("fake", "1") is None
    assert not await links.unlink("fake", "1")


async def test_a_new_identity_on_a_platform_replaces_the_old_one(links: Links) -> None:
    await links.join("other", "9", await links.issue("fake", "1"))
    await links.join("other", "8", await links.issue("fake", "1"))
    person = links.person_of("fake", "1")
    assert person is not None and links.members(person) == {"fake:1", "other:8"}
    assert links.person_of("other", "9") is None


async def test_links_survive_a_restart(links: Links, store: SqliteStore) -> None:
    await links.join("other", "9", await links.issue("fake", "1"))
    again = Links(store)
    await again.load()
    person = again.person_of("other", "9")
    assert person is not None and again.members(person) == {"fake:1", "other:9"}


async def test_only_direct_messages_are_rekeyed(links: Links) -> None:
    await links.join("other", "1", await links.issue("fake", "1"))
    person = links.person_of("fake", "1")
    assert person is not None
    dm = links.rekey(event(ALICE, "hi", chat_id="1"))
    group = links.rekey(event(ALICE, "hi", chat_id="-5", chat_type="group"))
    thread = links.rekey(event(ALICE, "hi", chat_id="1", chat_type="thread", thread_id="7"))
    assert dm.session_key == linked_key(person)
    assert str(group.session_key) == "fake:group:-5:1"
    assert str(thread.session_key) == "fake:thread:1:7"
    assert str(links.rekey(event(BOB, "hi", chat_id="2")).session_key) == "fake:dm:2"


# through the router and the service ---------------------------------------------------


def other_platform() -> FakeAdapter:
    return FakeAdapter(platform="other")


def code_in(text: str) -> str:
    found = re.search(rf"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}", text)
    assert found is not None, text
    return found.group(0)


async def test_a_linked_person_has_one_conversation_answered_where_each_message_came_from(
    running: GatewayFactory,
) -> None:
    other = other_platform()
    async with running(Step("first answer"), Step("second answer"), elsewhere=other) as gw:
        await gw.say(ALICE, "/link", chat_id="1")
        code = code_in(gw.adapter.texts()[-1])
        await gw.service.inbound(event(ALICE, f"/link {code}", chat_id="1", platform="other"))
        assert "Linked" in other.texts()[-1]
        assert "link code was used" in gw.adapter.texts()[-1]  # the chat that showed it
        await gw.say(ALICE, "hello from fake", chat_id="1")
        await gw.adapter.wait_sent(lambda t: "first answer" in t)
        await gw.service.inbound(event(ALICE, "and from other", chat_id="1", platform="other"))
        await other.wait_sent(lambda t: "second answer" in t)
        seen = [str(m.content) for m in gw.model.requests[-1].messages if m.role == "user"]
        assert [text.split("\n")[0] for text in seen[-2:]] == ["hello from fake", "and from other"]
        assert not any("second answer" in t for t in gw.adapter.texts())
        assert not any("first answer" in t for t in other.texts())


async def test_groups_are_never_linked(running: GatewayFactory) -> None:
    async with running(elsewhere=other_platform()) as gw:
        await gw.say(ALICE, "/link", chat_id="-5", chat_type="group", mentioned=True)
        assert "Only direct chats" in gw.adapter.texts()[-1]


async def test_a_stranger_cannot_link_into_someones_session(running: GatewayFactory) -> None:
    other = other_platform()
    async with running(elsewhere=other) as gw:
        await gw.say(ALICE, "/link", chat_id="1")
        code = code_in(gw.adapter.texts()[-1])
        await gw.service.inbound(event(MALLORY, f"/link {code}", chat_id="666", platform="other"))
        assert other.texts() == []  # not admitted: no command ran
        assert gw.service.links.person_of("other", MALLORY.id) is None
        await gw.service.inbound(event(ALICE, f"/link {code}", chat_id="1", platform="other"))
        assert "Linked" in other.texts()[-1]  # the code was not used up by the stranger


async def test_unlink_gives_each_chat_its_own_conversation_again(running: GatewayFactory) -> None:
    other = other_platform()
    async with running(elsewhere=other) as gw:
        await gw.say(ALICE, "/link", chat_id="1")
        code = code_in(gw.adapter.texts()[-1])
        await gw.service.inbound(event(ALICE, f"/link {code}", chat_id="1", platform="other"))
        await gw.service.inbound(event(ALICE, "/unlink", chat_id="1", platform="other"))
        assert "Unlinked" in other.texts()[-1]
        assert (gw.service.links.rekey(event(ALICE, "x", chat_id="1"))).session_key == (
            event(ALICE, "x", chat_id="1").session_key
        )
        await gw.say(ALICE, "/unlink", chat_id="1")
        assert "not linked" in gw.adapter.texts()[-1]


async def test_stop_from_the_other_surface_stops_the_linked_turn(running: GatewayFactory) -> None:
    other = other_platform()
    gate = asyncio.Event()
    async with running(Step("never shown", gate=gate), Step("next"), elsewhere=other) as gw:
        await gw.say(ALICE, "/link", chat_id="1")
        code = code_in(gw.adapter.texts()[-1])
        await gw.service.inbound(event(ALICE, f"/link {code}", chat_id="1", platform="other"))
        await gw.say(ALICE, "think", chat_id="1")
        await asyncio.wait_for(gw.model.called.wait(), 5)
        await gw.service.inbound(event(ALICE, "/stop", chat_id="1", platform="other"))
        assert "Stopped" in other.texts()[-1]
        gate.set()
        person = gw.service.links.person_of("fake", ALICE.id)
        assert person is not None
        await asyncio.wait_for(gw.service.dispatcher.wait_idle(str(linked_key(person))), 5)
        assert not any("never shown" in t for t in gw.adapter.texts() + other.texts())


async def test_the_card_shows_where_the_message_came_from_and_is_answered_from_either(
    running: GatewayFactory,
) -> None:
    other = other_platform()
    danger = Step(None, tools=(("danger", {"command": "rm -rf build"}),))
    async with running(danger, Step("done"), elsewhere=other) as gw:
        await gw.say(ALICE, "/link", chat_id="1")
        code = code_in(gw.adapter.texts()[-1])
        await gw.service.inbound(event(ALICE, f"/link {code}", chat_id="1", platform="other"))
        await gw.say(ALICE, "clean up", chat_id="1")
        await gw.card()  # on fake, where the message came from
        await gw.service.inbound(event(ALICE, "/approve", chat_id="1", platform="other"))
        assert "Approved" in other.texts()[-1]
        await gw.adapter.wait_sent(lambda t: "done" in t)
        assert gw.ran == ["danger rm -rf build"]
        assert not any(c.buttons for c in other.of("send"))
