"""The outbox in the store: a reply stored the first time comes back as stored (without a
second read), and a later delivery of the same turn gets the first texts and sent marks;
through a store outage (issue 28) a reply is neither lost nor sent twice."""

from __future__ import annotations

from typing import cast

import pytest

from adapters.base import AdapterError, ChatRef
from core.agent.loop import CRASH_REPLY
from core.agent.turn import TurnResult
from core.model.wire import parse_reply
from core.store.base import OutboxChunk, Store, StoreUnavailable
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import ChatDirectory
from gateway.outbound.pipeline import Outbound
from gateway.turns.progress import ProgressConfig
from gateway.turns.replies import Replies
from tests.gateway.fakes import FakeAdapter, Person, event

TURN = "turn-1"
CHAT = ChatRef("telegram", "42")
ALICE = Person("1", "Alice")


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def chunks(*texts: str) -> list[OutboxChunk]:
    return [OutboxChunk(TURN, i, "telegram", "42", None, t, True) for i, t in enumerate(texts)]


def replied(text: str) -> str:
    """``text`` as a model reply carries it in: repaired at that edge (core/model/wire.py);
    the store binds text as given (core/text.py)."""
    content = parse_reply({"choices": [{"message": {"content": text}}]}).content
    assert content is not None
    return content


async def test_a_new_reply_comes_back_as_a_read_would_return_it(store: Store) -> None:
    first = await store.put_outbox(chunks("one", replied("two \ud800 lone")))
    again = await store.put_outbox(chunks("one", replied("two \ud800 lone")))  # from the file
    assert first == again
    assert [c.text for c in first] == ["one", "two \ufffd lone"]
    assert all(c.message_id is None for c in first)


async def test_a_second_delivery_gets_the_first_texts_and_marks(store: Store) -> None:
    await store.put_outbox(chunks("first answer", "second part"))
    await store.mark_outbox_sent(TURN, 0, "m-100")
    replayed = await store.put_outbox(chunks("a regenerated answer"))
    assert [(c.text, c.message_id) for c in replayed] == [
        ("first answer", "m-100"),
        ("second part", None),
    ]


async def test_a_chunk_started_and_never_marked_sent_reads_back_as_in_flight(
    store: Store,
) -> None:
    await store.put_outbox(chunks("sent", "in flight", "not begun"))
    await store.mark_outbox_started(TURN, 0)
    await store.mark_outbox_sent(TURN, 0, "m-1")
    await store.mark_outbox_started(TURN, 1)  # the process stops during this send
    replayed = await store.put_outbox(chunks("sent", "in flight", "not begun"))
    assert [(c.index, c.started_at is not None, c.message_id) for c in replayed] == [
        (0, True, "m-1"),
        (1, True, None),  # in flight: begun, never marked arrived
        (2, False, None),
    ]


class Outage:
    """The real store, except that while ``down`` its outbox marks are refused as an
    unreachable store refuses them (``StoreUnavailable``); everything else passes through."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False
        self.outbox_down = False
        """Also refuse to store a reply (an outage from before the reply was ready)."""

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def put_outbox(self, chunks: list[OutboxChunk]) -> list[OutboxChunk]:
        if self.outbox_down:
            raise StoreUnavailable("cannot store the reply: [Errno 111] Connect call failed")
        return await self.store.put_outbox(chunks)

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        self._refuse()
        await self.store.mark_outbox_started(turn_id, index)

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        self._refuse()
        await self.store.mark_outbox_sent(turn_id, index, message_id)

    def _refuse(self) -> None:
        if self.down:
            raise StoreUnavailable("cannot update outbox chunk: [Errno 111] Connect call failed")


async def test_a_chunk_sent_while_the_store_could_not_mark_it_is_not_sent_again(
    store: Store,
) -> None:
    """A reply sent during an outage (its marks refused) and delivered again once the
    store is back — its update replayed, as it was never marked done — sends nothing a
    second time, and the marks are stored then."""
    adapter, outage = FakeAdapter(), Outage(store)
    delivery = Delivery(store=cast(Store, outage))
    outage.down = True
    first = await delivery.reply(Outbound(adapter), CHAT, "the answer", turn_id=TURN)
    outage.down = False
    again = await delivery.reply(Outbound(adapter), CHAT, "the answer", turn_id=TURN)
    assert len(first) == 1 and again == []
    assert adapter.texts() == ["the answer"]
    [stored] = await store.put_outbox(chunks("the answer"))
    assert stored.message_id == first[0].message_id


async def test_a_failure_notice_sent_in_an_outage_does_not_stand_for_the_answer_replayed(
    store: Store,
) -> None:
    """A turn the outage cut short is answered with its failure notice (under the turn's id,
    neither stored in the outbox nor marked); its update replayed once the store is back
    delivers the stored answer under the same id, which is sent in full — not taken for the
    chunk the notice was (tests/cluster/test_e2e_outage.py lost such answers)."""
    adapter, outage = FakeAdapter(), Outage(store)
    delivery = Delivery(store=cast(Store, outage))
    outage.down = outage.outbox_down = True
    [notice] = await delivery.reply(Outbound(adapter), CHAT, CRASH_REPLY, turn_id=TURN)
    outage.down = outage.outbox_down = False
    [answer] = await delivery.reply(Outbound(adapter), CHAT, "the answer", turn_id=TURN)
    assert await delivery.reply(Outbound(adapter), CHAT, "the answer", turn_id=TURN) == []
    assert adapter.texts() == [CRASH_REPLY, "the answer"]
    [stored] = await store.put_outbox(chunks("the answer"))
    assert stored.message_id == answer.message_id != notice.message_id


async def test_a_chunk_lost_in_an_outage_is_sent_when_the_turn_is_delivered_again(
    store: Store,
) -> None:
    """A chunk whose send failed (its relay refused by the unreachable store) is left
    unsent in the outbox: the next delivery of the turn sends it, once."""
    adapter = FakeAdapter()
    delivery = Delivery(store=store)
    refused = "Send to telegram not relayed: the store did not take it (CannotConnectNowError)"
    adapter.fail("send", AdapterError(refused))
    assert await delivery.reply(Outbound(adapter), CHAT, "kept", turn_id=TURN) == []
    [sent] = await delivery.reply(Outbound(adapter), CHAT, "kept", turn_id=TURN)
    assert await delivery.reply(Outbound(adapter), CHAT, "kept", turn_id=TURN) == []
    assert adapter.texts() == ["kept", "kept"]  # the refused try, then the one that arrived
    [stored] = await store.put_outbox(chunks("kept"))
    assert stored.message_id == sent.message_id


async def test_a_turn_reported_again_after_a_lost_reply_is_answered_not_dropped(
    store: Store,
) -> None:
    """The Replies of a process whose reply was lost to an outage: when the turn's update is
    replayed and its stored result reported again, the reply goes out (once), where a
    memory of "answered" turns used to drop it."""
    adapter = FakeAdapter()
    directory = ChatDirectory([adapter])
    said = event(ALICE, "question")
    directory.record(said)
    replies = Replies(directory, Delivery(store=store), ProgressConfig(mode="off"))
    result = TurnResult(
        turn_id=TURN, session_id="s-1", status="completed", exit_reason="final_answer",
        reply="the answer", iterations=1,
    )  # fmt: skip
    adapter.fail("send", AdapterError("Send to fake not relayed: the store did not take it"))
    await replies.deliver(str(said.session_key), result, None, None)
    await replies.deliver(str(said.session_key), result, None, None)  # the update replayed
    await replies.deliver(str(said.session_key), result, None, None)  # and once more
    assert adapter.texts() == ["the answer", "the answer"]  # refused, then the one shown
