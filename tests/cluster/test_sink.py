"""Claim-or-forward (gateway/cluster/sink.py), the sweeper (gateway/cluster/sweeper.py) and
the caller's fence through the outbound scheduler, on a real PostgreSQL store: the sink
with the real Leases, Members and Mailbox and a router of the test's own; the sweeper with
two whole nodes (tests/cluster/node_harness.py) and a process that died holding a session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.base import InboundEvent, SentMessage
from adapters.calls import Call, Send
from core.store.fencing import Fence, current_fence, fenced
from core.store.postgres import PgStore
from core.store.records import InboundRecord, InboundState
from gateway.cluster.leases import Leases
from gateway.cluster.mailbox import Mailbox
from gateway.cluster.members import Members
from gateway.cluster.sink import ClusterClaim, session_lease
from gateway.inbound.stages import Named, fold
from gateway.outbound.pipeline import Outbound
from tests.cluster.node_harness import ALICE_KEY, Cluster, echo
from tests.gateway.fakes import FakeAdapter, Person, event
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.polling import until
from tests.telegram.harness import replies

ANN = Person("7", "Ann")
OTHER = "other/00000001"


@dataclass
class Router:
    """Records each event; holds it open while ``gate`` is set; settles it ``outcome``."""

    outcome: bool = True
    gate: asyncio.Event | None = None
    events: list[InboundEvent] = field(default_factory=list)
    fences: list[Fence | None] = field(default_factory=list)
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, event: InboundEvent) -> None:
        self.events.append(event)
        self.fences.append(current_fence())
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        event.receipt.settle(self.outcome)


class Sink:
    """The claim stage folded in front of the test's router (``sink(event)``), and the
    stage itself for what it holds (``sink.drain()``, ``sink.stats`` ...)."""

    def __init__(self, claim: ClusterClaim, router: Router) -> None:
        self.claim, self._enter = claim, fold([Named("cluster_claim", claim)], router)

    async def __call__(self, event: InboundEvent) -> None:
        await self._enter(event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.claim, name)


@dataclass
class Rig:
    store: PgStore
    sink: Sink
    router: Router
    leases: Leases
    other: Leases
    busy: set[str]


@pytest.fixture
async def rig(pg_store: PgStore) -> AsyncIterator[Rig]:
    me = pg_store.process_id
    leases = Leases(pg_store.pool, me, 30.0)
    members = Members(pg_store.pool, me, "test", 30.0)
    mailbox = Mailbox(pg_store.pool, pg_store.dsn, me)
    router = Router()
    busy: set[str] = set()
    claim = ClusterClaim(
        store=pg_store, leases=leases, members=members, mailbox=mailbox,
        process_id=me, leased_platforms=lambda: frozenset({"telegram"}), busy=busy.__contains__,
    )  # fmt: skip
    sink = Sink(claim, router)
    try:
        yield Rig(pg_store, sink, router, leases, Leases(pg_store.pool, OTHER, 30.0), busy)
    finally:
        await sink.aclose()
        await mailbox.aclose()


def telegram(text: str, update_id: str) -> InboundEvent:
    return event(ANN, text, platform="telegram", update_id=update_id)


async def stored(store: PgStore, item: InboundEvent, state: InboundState = "processing") -> None:
    record = InboundRecord("telegram", item.update_id, str(item.session_key), "{}", time.time())
    await store.enqueue_inbound(record)
    await store.set_inbound_state("telegram", item.update_id, state)


async def test_a_per_process_platform_goes_straight_to_the_router(rig: Rig) -> None:
    web = event(ANN, "hi", platform="web")
    await rig.sink(web)
    assert rig.router.events == [web] and rig.router.fences == [None]
    assert await rig.leases.holder(session_lease(str(web.session_key))) is None


async def test_a_free_session_runs_here_under_its_fence_then_is_marked_done_and_released(
    rig: Rig,
) -> None:
    hello = telegram("hello", "1")
    await stored(rig.store, hello)
    await rig.sink(hello)
    await rig.sink.drain()

    name = session_lease(str(hello.session_key))
    [fence] = rig.router.fences
    assert fence is not None and (fence.lease, fence.owner) == (name, rig.store.process_id)
    assert await hello.receipt.wait() is True
    record = await rig.store.get_inbound("telegram", "1")
    assert record is not None and record.state == "done"
    holder = await rig.leases.holder(name)
    assert holder is not None and not holder.live and rig.sink.held() == []


async def test_an_item_already_done_or_in_flight_here_is_dropped(rig: Rig) -> None:
    done = telegram("old", "1")
    await stored(rig.store, done, "done")
    await rig.sink(done)
    assert rig.router.events == [] and await done.receipt.wait() is True

    rig.router.gate = asyncio.Event()
    first = telegram("twice", "2")
    await stored(rig.store, first)
    running = asyncio.create_task(rig.sink(first))
    await rig.router.entered.wait()
    again = telegram("twice", "2")
    await rig.sink(again)
    assert again.receipt.handed_over  # the delivery in flight here marks it
    rig.router.gate.set()
    await running
    await rig.sink.drain()
    assert [e.update_id for e in rig.router.events] == ["2"]
    assert await first.receipt.wait() is True
    assert rig.sink.stats.dropped == 2


async def test_a_session_another_live_process_holds_is_forwarded_and_handed_over(
    rig: Rig,
) -> None:
    hello = telegram("theirs", "1")
    assert await rig.other.acquire(session_lease(str(hello.session_key))) is not None
    await rig.sink(hello)

    assert rig.router.events == [] and hello.receipt.handed_over
    [mail] = await rig.store.pool.fetch("SELECT target, kind FROM cluster_mail")
    assert (mail["target"], mail["kind"]) == (OTHER, "event")
    assert rig.sink.stats.forwarded == 1


async def test_a_done_mark_refused_after_a_takeover_hands_the_event_over(rig: Rig) -> None:
    rig.router.gate = asyncio.Event()
    hello = telegram("taken", "1")
    await stored(rig.store, hello)
    running = asyncio.create_task(rig.sink(hello))
    await rig.router.entered.wait()
    name = session_lease(str(hello.session_key))
    await rig.store.pool.execute(
        "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1",
        name,
    )
    assert await rig.other.acquire(name) is not None  # taken over while the work ran

    rig.router.gate.set()
    await running
    await rig.sink.drain()
    assert hello.receipt.handed_over and await hello.receipt.wait() is False
    record = await rig.store.get_inbound("telegram", "1")
    assert record is not None and record.state == "processing"
    assert rig.sink.stats.lost == 1


async def test_a_session_held_here_with_nothing_to_do_is_released_by_the_heartbeat(
    rig: Rig,
) -> None:
    idle, working = "telegram:dm:1", "telegram:dm:2"
    for key in (idle, working):
        assert await rig.leases.acquire(session_lease(key)) is not None
    rig.busy.add(working)  # its turn still runs (a steer's leftover, say)

    assert await rig.sink.release_idle() == 1
    assert [f.lease for f in rig.sink.held()] == [session_lease(working)]
    gone = await rig.leases.holder(session_lease(idle))
    assert gone is not None and not gone.live


async def test_calls_of_two_sessions_through_one_scheduler_carry_each_its_own_fence() -> None:
    seen: list[tuple[str, Fence | None]] = []

    class Recording(FakeAdapter):
        async def perform(self, call: Call) -> SentMessage | None:
            assert isinstance(call, Send)
            seen.append((call.text, current_fence()))
            return await super().perform(call)

    outbound = Outbound.paced(Recording())
    one, two = Fence("session:one", "p/1", 1), Fence("session:two", "p/1", 3)
    chat = event(ANN, "x").chat

    async def send(fence: Fence, text: str) -> None:
        with fenced(fence):
            await outbound.perform(Send(chat, text))

    await asyncio.gather(send(one, "for one"), send(two, "for two"), send(one, "one again"))
    assert sorted(seen, key=lambda s: s[0]) == [
        ("for one", one),
        ("for two", two),
        ("one again", one),
    ]
    assert outbound.scheduler is not None
    await outbound.scheduler.aclose()


# the sweeper, with whole nodes ---------------------------------------------------------------
@pytest.fixture
async def cluster(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Cluster]:
    telegram_sim.chat(ALICE.id)
    made = Cluster(pg_url, telegram_sim, model_server, tmp_path)
    try:
        yield made
    finally:
        await made.stop()


async def test_an_update_forwarded_to_a_process_that_died_is_delivered_again_once(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(echo)
    a = await cluster.start("a")
    ghost = Leases(a.store.pool, "ghost/00000000", 30.0)  # joined never, dies at once
    assert await ghost.acquire(session_lease(ALICE_KEY)) is not None
    await telegram_sim.user_says(ALICE.id, "anyone there")
    await until(lambda: a.node.stats().events_forwarded == 1)
    await a.built[0].drain()
    assert await cluster.inbound_states() == ["processing"]

    a.node.sweeper.age = 0.0  # the item has waited a tick already
    await a.node.tick()
    assert a.node.sweeper.redelivered == 0  # the ghost's lease is still live
    await cluster.fetch(
        "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second'"
        " WHERE owner = 'ghost/00000000'"
    )
    await a.node.tick()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: anyone there" in m.text)
    await a.service.dispatcher.wait_idle(ALICE_KEY)
    await a.node.claim.drain()
    await a.node.tick()

    assert a.node.sweeper.redelivered == 1
    assert len(replies(telegram_sim, ALICE.id, "echo: anyone there")) == 1
    assert await cluster.inbound_states() == ["done"]
    [turn] = await cluster.turns()
    assert (turn["status"], turn["process_id"]) == ("completed", a.process_id)
