"""A linked person's web-chat DM takes the same session lease as their other platforms
(issue 28 point 6, ``docs/cluster.md`` §3–§4): never two turns of one session at once
across the cluster. The real ClusterClaim stage, Leases, Members and Mailbox on PostgreSQL, a
router of the test's own (it records each event and the fence it ran under)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from adapters.base import InboundEvent
from core.store.postgres import PgStore
from gateway.cluster.leases import Leases
from gateway.cluster.mailbox import Mailbox
from gateway.cluster.members import Members
from gateway.cluster.sink import ClusterClaim, session_lease
from tests.cluster.test_sink import ANN, OTHER, Router, Sink
from tests.gateway.fakes import Person, event

PERSON_KEY = "link:dm:ann"
LEASE = session_lease(PERSON_KEY)


def person_key(inbound: InboundEvent) -> str:
    """Ann's web and Telegram identities are linked: her DMs run in one session."""
    return PERSON_KEY if inbound.sender.id == ANN.id else str(inbound.session_key)


@dataclass
class Cluster:
    store: PgStore
    sink: Sink
    router: Router
    other: Leases


@pytest.fixture
async def cluster(pg_store: PgStore) -> AsyncIterator[Cluster]:
    me = pg_store.process_id
    mailbox = Mailbox(pg_store.pool, pg_store.dsn, me)
    router = Router()
    sink = ClusterClaim(
        store=pg_store, leases=Leases(pg_store.pool, me, 30.0),
        members=Members(pg_store.pool, me, "test", 30.0), mailbox=mailbox, process_id=me,
        leased_platforms=lambda: frozenset({"telegram"}), busy=lambda key: False,
        key_of=person_key,
    )  # fmt: skip
    try:
        yield Cluster(pg_store, Sink(sink, router), router, Leases(pg_store.pool, OTHER, 30.0))
    finally:
        await sink.aclose()
        await mailbox.aclose()


async def test_a_linked_web_dm_runs_here_under_the_persons_session_lease(
    cluster: Cluster,
) -> None:
    web = event(ANN, "hi from the browser", platform="web")

    await cluster.sink(web)
    await cluster.sink.drain()

    [fence] = cluster.router.fences
    assert fence is not None
    assert (fence.lease, fence.owner) == (LEASE, cluster.store.process_id)


async def test_a_linked_web_dm_waits_while_another_process_runs_the_session(
    cluster: Cluster,
) -> None:
    theirs = await cluster.other.acquire(LEASE)  # Ann's Telegram turn runs over there
    assert theirs is not None
    web = event(ANN, "hi from the browser", platform="web")

    await cluster.sink(web)  # returns at once: the web chat is not held up
    assert cluster.router.events == [] and not web.receipt.settled
    await cluster.other.release(theirs)  # that turn ended
    await asyncio.wait_for(cluster.router.entered.wait(), 5)
    await cluster.sink.drain()

    [fence] = cluster.router.fences
    assert fence is not None and (fence.lease, fence.owner) == (LEASE, cluster.store.process_id)
    assert fence.epoch > theirs.epoch
    assert await web.receipt.wait() is True


async def test_a_linked_web_stop_reaches_the_process_running_the_session(
    cluster: Cluster,
) -> None:
    assert await cluster.other.acquire(LEASE) is not None
    stop = event(ANN, "/stop", platform="web")

    await cluster.sink(stop)

    assert cluster.router.events == [] and stop.receipt.handed_over
    [mail] = await cluster.store.pool.fetch("SELECT target, kind FROM cluster_mail")
    assert (mail["target"], mail["kind"]) == (OTHER, "event")


async def test_an_unlinked_web_dm_still_goes_straight_to_the_router(cluster: Cluster) -> None:
    bob = event(Person("8", "Bob"), "hi", platform="web")

    await cluster.sink(bob)

    assert cluster.router.events == [bob] and cluster.router.fences == [None]
