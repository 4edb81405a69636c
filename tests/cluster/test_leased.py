"""The cluster's outbound stage of a leased bot (gateway/cluster/relay_stage.py) and the bot's
adapter lifecycle (gateway/cluster/bots.py), with the real Telegram adapter against the
Telegram simulator, relaying through real mailboxes on a real PostgreSQL server: two bots'
folds (gateway/outbound/pipeline.py: schedule → redact → count → relay) stand for two processes, A
owning the bot and B relaying."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from adapters.base import AdapterError, ChatRef, Forbidden, InboundEvent, SentMessage
from adapters.calls import Delete, Send, SendFile
from adapters.telegram import TelegramAdapter
from core.attachments import OutgoingFile
from core.redaction import remember_secrets
from core.store.fencing import Fence, current_fence
from core.store.sqlite import SqliteStore
from gateway.app import _check_ways_in
from gateway.cluster.bots import RELAYED, LeasedBot
from gateway.cluster.mailbox import Mailbox
from gateway.cluster.relay import Relay
from gateway.cluster.relay_stage import RelayStage, bot_lease_name
from gateway.outbound.pipeline import Outbound
from gateway.web.metrics import GatewayMetrics
from tests.cluster.pg_pool import cluster_pool
from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.harness import EventLog, sim_settings

A, B = "a/00000001", "b/00000002"
DM = ChatRef("telegram", str(ALICE.id))


@pytest.fixture(autouse=True)
def alice_has_started_the_bot(telegram_sim: TelegramSim) -> None:
    telegram_sim.chat(ALICE.id)


@pytest.fixture
async def pool(pg_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with cluster_pool(pg_url) as opened:
        yield opened


@dataclass
class Process:
    """One gateway process's part: its mailbox, relay, the leased bot, its relay stage, its
    Outbound (counted by the process's own traffic counters)."""

    mailbox: Mailbox
    relay: Relay
    leased: LeasedBot
    stage: RelayStage
    outbound: Outbound
    metrics: GatewayMetrics
    built: list[TelegramAdapter]

    def sent_counted(self) -> float:
        """Sends and edits this process's traffic counters counted."""
        labels = {"platform": "telegram"}
        value = self.metrics.registry.get_sample_value("commonos_outbound_messages_total", labels)
        return value or 0.0


RENEWAL_WAIT = 0.2
"""How long a call waits here for a stale lease's renewal or loss (the lease's length in
a cluster); only the test that expects the refusal waits it out."""


class Cluster:
    def __init__(self, pool: asyncpg.Pool, dsn: str, sim: TelegramSim, store: SqliteStore) -> None:
        self.pool, self.dsn, self.sim, self.store = pool, dsn, sim, store
        self.bot = bot_lease_name("telegram", sim.token)
        self.processes: list[Process] = []

    async def process(self, process_id: str, sink: EventLog) -> Process:
        built: list[TelegramAdapter] = []

        def build() -> TelegramAdapter:
            adapter = TelegramAdapter(self.sim.token, self.store, sim_settings(self.sim))
            built.append(adapter)
            return adapter

        mailbox = Mailbox(self.pool, self.dsn, process_id)
        relay = Relay(mailbox, process_id, timeout=10.0)
        stage = RelayStage(self.bot, relay, renewal_wait=RENEWAL_WAIT)
        leased = LeasedBot(build, stage)
        metrics = GatewayMetrics()
        outbound = Outbound.paced(leased, metrics.traffic, stage)
        mailbox.serve(process_id, relay.on_result)
        await mailbox.start()
        await leased.start(sink)
        process = Process(mailbox, relay, leased, stage, outbound, metrics, built)
        self.processes.append(process)
        return process

    async def own(self, process: Process, epoch: int = 1) -> Fence:
        """``process`` won the bot's lease: it starts the bot and serves its calls."""
        fence = Fence(self.bot, "owner", epoch)
        await process.leased.take(fence)
        process.mailbox.serve(self.bot, process.relay.executor(process.outbound.perform))
        return fence

    async def close(self) -> None:
        for process in self.processes:
            await process.leased.stop()
            await process.outbound.aclose()
            await process.relay.aclose()
            await process.mailbox.aclose()


@pytest.fixture
async def cluster(
    pool: asyncpg.Pool, pg_url: str, telegram_sim: TelegramSim, store: SqliteStore
) -> AsyncIterator[Cluster]:
    made = Cluster(pool, pg_url, telegram_sim, store)
    try:
        yield made
    finally:
        await made.close()


def test_the_bot_lease_name_hides_the_credential() -> None:
    token = "123456:ABC-secret"
    name = bot_lease_name("telegram", token)
    assert name == f"bot:telegram:{hashlib.sha256(token.encode()).hexdigest()[:12]}"
    assert "secret" not in name and len(name.rsplit(":", 1)[1]) == 12


async def test_started_but_not_owned_connects_nowhere_and_is_not_down(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    b = await cluster.process(B, EventLog())
    assert telegram_sim.calls_to("getMe") == [] and telegram_sim.polls == []
    assert (b.leased.health.state, b.leased.health.reason) == ("up", RELAYED)
    assert b.leased.capabilities.max_text_length == 4096 and not b.leased.owned
    _check_ways_in([b.leased])  # the only way in, relayed: the gateway still starts


async def test_take_polls_give_up_stops_and_a_fresh_adapter_polls_again(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    events = EventLog()
    a = await cluster.process(A, events)
    fence = await cluster.own(a)
    first = a.leased.real
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() > 0)
    assert a.leased.health.state == "up" and a.leased.health.reason == ""
    await telegram_sim.user_says(ALICE.id, "hello")
    assert (await events.next_event()).text == "hello"

    await a.leased.give_up()
    assert not a.leased.owned and first.health.state == "stopped"
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() == 0)
    polled = len(telegram_sim.polls)
    assert a.leased.real is not first and a.leased.health.reason == RELAYED

    await a.leased.take(Fence(fence.lease, fence.owner, fence.epoch + 1))
    await telegram_sim.wait_for(lambda: len(telegram_sim.polls) > polled)
    assert a.leased.real is a.built[-1] and len(a.built) == 2
    await telegram_sim.user_says(ALICE.id, "again")
    assert (await events.next_event(2)).text == "again"
    assert not any(
        one.overlaps(other)
        for i, one in enumerate(telegram_sim.polls)
        for other in telegram_sim.polls[i + 1 :]
    ), "two pollers at once"


async def test_the_real_adapter_runs_under_the_bot_fence(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    fences: list[Fence | None] = []

    class FenceLog(EventLog):
        async def __call__(self, event: InboundEvent) -> None:
            fences.append(current_fence())
            await super().__call__(event)

    events = FenceLog()
    a = await cluster.process(A, events)
    fence = await cluster.own(a)
    await telegram_sim.user_says(ALICE.id, "hi")
    await events.next_event()
    assert fences == [fence]


async def test_a_send_of_the_non_owner_is_made_once_by_the_owner(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    sent = await b.outbound.perform(Send(DM, "<b>from</b> B"))
    [call] = telegram_sim.calls_to("sendMessage")
    assert call.params["text"] == "<b>from</b> B"
    [message] = telegram_sim.bot_messages(ALICE.id)
    assert sent == SentMessage(DM, message.id) and message.text == "from B"
    assert b.built[0].health.state == "starting"  # B's own adapter never connected
    assert (b.relay.stats.relayed, a.relay.stats.served) == (1, 1)


async def test_a_relayed_call_is_scheduled_redacted_and_counted_once_by_the_owner(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    """B's fold mails the raw call before its scheduler, redaction and counters; A's own
    fold makes it: one scheduled call, one count, the secret redacted there."""
    remember_secrets(["relay-secret-4f2a9c"])
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    await b.outbound.perform(Send(DM, "token relay-secret-4f2a9c"))
    [call] = telegram_sim.calls_to("sendMessage")
    assert "relay-secret-4f2a9c" not in call.params["text"]
    assert a.outbound.scheduler is not None and b.outbound.scheduler is not None
    assert (a.outbound.scheduler.stats.calls, b.outbound.scheduler.stats.calls) == (1, 0)
    assert (a.sent_counted(), b.sent_counted()) == (1.0, 0.0)


async def test_a_delete_of_the_non_owner_is_not_awaited_and_made_by_the_owner(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    sent = await b.outbound.perform(Send(DM, "soon gone"))
    assert await b.outbound.perform(Delete(sent)) is None
    await telegram_sim.wait_for(lambda: len(telegram_sim.calls_to("deleteMessage")) == 1)
    assert b.outbound.scheduler is not None and b.outbound.scheduler.stats.calls == 0


async def test_the_owners_platform_error_reaches_the_non_owner_as_the_same_class(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    telegram_sim.fail_next("sendMessage", SimError.forbidden())
    with pytest.raises(Forbidden, match="blocked"):
        await b.outbound.perform(Send(DM, "x"))


async def test_a_429_is_waited_out_by_the_owners_scheduler(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(0.2))
    sent = await b.outbound.perform(Send(DM, "after the flood"))
    assert sent is not None
    assert len(telegram_sim.calls_to("sendMessage")) == 2
    assert a.outbound.scheduler is not None and a.outbound.scheduler.stats.rate_limited == 1
    assert b.outbound.scheduler is not None and b.outbound.scheduler.stats.rate_limited == 0


async def test_an_owner_whose_lease_is_no_longer_valid_does_not_call_the_platform(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    """Neither renewed nor lost within the wait (the database out of reach): refused."""
    a = await cluster.process(A, EventLog())
    valid = [True]
    await a.leased.take(Fence(cluster.bot, A, 1), lambda: valid[0])
    await a.outbound.perform(Send(DM, "while valid"))
    valid[0] = False
    with pytest.raises(AdapterError, match=f"^lost the lease of {cluster.bot}$"):
        await a.outbound.perform(Send(DM, "paused too long"))
    assert [c.params["text"] for c in telegram_sim.calls_to("sendMessage")] == ["while valid"]


async def test_a_call_on_a_stale_lease_is_made_once_the_node_renews_it(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    """A paused owner wakes up inside its lease: its call waits for the renewal, then goes
    to the platform (not refused, not lost)."""
    a = await cluster.process(A, EventLog())
    valid = [False]
    await a.leased.take(Fence(cluster.bot, A, 1), lambda: valid[0])
    call = asyncio.create_task(a.outbound.perform(Send(DM, "after the pause")))
    await until_waiting(a.stage)  # the call passed the scheduler and waits on the lease
    assert not call.done() and telegram_sim.calls_to("sendMessage") == []
    valid[0] = True
    await a.stage.renewed()
    assert (await call) is not None
    assert [c.params["text"] for c in telegram_sim.calls_to("sendMessage")] == ["after the pause"]


async def test_a_call_on_a_stale_lease_that_is_then_lost_goes_to_the_new_owner(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    valid = [False]
    await a.leased.take(Fence(cluster.bot, A, 1), lambda: valid[0])
    call = asyncio.create_task(a.outbound.perform(Send(DM, "made by the new owner")))
    await until_waiting(a.stage)
    await a.leased.give_up()
    await cluster.own(b, epoch=2)
    sent = await call
    assert sent is not None and not a.leased.owned
    assert [c.params["text"] for c in telegram_sim.calls_to("sendMessage")] == [
        "made by the new owner"
    ]


async def test_the_non_owner_downloads_a_file_the_owner_received(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    events = EventLog()
    a = await cluster.process(A, events)
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    data = bytes(range(256)) * 300
    await telegram_sim.user_sends(ALICE.id, "document", data, name="notes.bin")
    (attachment,) = (await events.next_event()).attachments
    chunks = [chunk async for chunk in b.leased.download(attachment)]
    assert b"".join(chunks) == data and not b.leased.owned
    await b.leased.stop()
    assert b.built[0].health.state == "stopped"  # its Bot API client, opened for it, closed


async def until_waiting(stage: RelayStage) -> None:
    """Until a call waits in ``stage`` for lease news (it passed the scheduler)."""
    for _ in range(10_000):
        if stage._lease_news._waiters:
            return
        await asyncio.sleep(0)
    raise AssertionError("no call waits on the lease")


async def test_a_start_that_fails_leaves_the_bot_not_owned_with_a_fresh_adapter(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    telegram_sim.fail_next("getMe", SimError.server_error(502))
    with pytest.raises(AdapterError):
        await a.leased.take(Fence(cluster.bot, A, 1))
    assert not a.leased.owned and len(a.built) == 2
    assert a.built[0].health.state == "stopped"
    await a.leased.take(Fence(cluster.bot, A, 2))
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() > 0)
    assert a.leased.owned and a.leased.real is a.built[1]


async def test_a_call_made_while_the_bot_starts_waits_for_it(
    cluster: Cluster, telegram_sim: TelegramSim
) -> None:
    a = await cluster.process(A, EventLog())
    hold = telegram_sim.hold_next("getMe")
    taking = asyncio.create_task(a.leased.take(Fence(cluster.bot, A, 1)))
    await hold.reached.wait()
    sending = asyncio.create_task(a.outbound.perform(Send(DM, "early")))
    await asyncio.wait({sending}, timeout=1.0)  # it waits for the start: not made, no error
    assert not sending.done() and telegram_sim.calls_to("sendMessage") == []
    hold.release()
    await taking
    assert await sending is not None
    assert [c.params["text"] for c in telegram_sim.calls_to("sendMessage")] == ["early"]


async def test_a_file_the_non_owner_sends_is_uploaded_by_the_owner(
    cluster: Cluster, telegram_sim: TelegramSim, tmp_path: Path
) -> None:
    a = await cluster.process(A, EventLog())
    b = await cluster.process(B, EventLog())
    await cluster.own(a)
    data = b"line 1\n" * 1000
    (tmp_path / "notes.txt").write_bytes(data)
    file = OutgoingFile("t1.f0", str(tmp_path / "notes.txt"), "notes.txt", "text/plain",
                        len(data), "document")  # fmt: skip
    sent = await b.outbound.perform(SendFile(DM, file, "the notes", key=file.key))
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.name, kept.file.data, kept.caption) == (
        "sendDocument", "notes.txt", data, "the notes",
    )  # fmt: skip
    assert sent is not None and sent.message_id == str(kept.message_id)
