"""Two cluster nodes in one event loop (tests/cluster/node_harness.py): two GatewayServices,
each its own PgStore pool and ClusterNode, on one real PostgreSQL database, one Telegram bot
on the simulator through the real python-telegram-bot, one scripted model server
(docs/cluster.md, issue 23). Heartbeats are ticked by hand."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import ChatRef
from adapters.calls import Send
from core.approver import ApprovalRequest
from gateway.cluster.bots import RELAYED
from gateway.cluster.mailbox import Mail
from gateway.cluster.sink import session_lease
from gateway.control.links import linked_key
from gateway.turns.approvals import RESTART_NOTICE, card_buttons
from tests.cluster.node_harness import ALICE_KEY, Cluster, echo
from tests.platform_sim.telegram_files import Media, png
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.support.polling import until
from tests.telegram.harness import AlbumGate, replies


@pytest.fixture(autouse=True)
def alice_has_started_the_bot(telegram_sim: TelegramSim) -> None:
    telegram_sim.chat(ALICE.id)


@pytest.fixture
async def cluster(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Cluster]:
    model_server.default = None
    made = Cluster(pg_url, telegram_sim, model_server, tmp_path)
    try:
        yield made
    finally:
        await made.stop()


async def test_of_two_nodes_one_owns_and_polls_the_bot_the_other_relays(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(echo)
    a = await cluster.start("a")
    b = await cluster.start("b")
    await b.node.tick()
    await a.node.tick()

    assert (a.bot.owned, b.bot.owned) == (True, False)
    assert b.bot.health.state == "up" and b.bot.health.reason == RELAYED
    assert b.built[0].identity is None  # never started: it never polled
    [lease] = await cluster.fetch("SELECT owner, epoch FROM leases WHERE name = $1", cluster.bot)
    assert (lease["owner"], lease["epoch"]) == (a.process_id, 1)
    assert a.node.stats().bots_owned == (cluster.bot,) and b.node.stats().bots_owned == ()

    await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: hello" in m.text)
    assert telegram_sim.poll_conflicts() == []


async def test_a_message_of_a_session_the_other_holds_is_forwarded_and_answered_once(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(echo)
    a = await cluster.start("a")
    b = await cluster.start("b")
    assert await b.node.leases.acquire(session_lease(ALICE_KEY)) is not None

    await telegram_sim.user_says(ALICE.id, "over there")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: over there" in m.text)
    await b.service.dispatcher.wait_idle(ALICE_KEY)
    await b.node.claim.drain()  # its done mark and release are over

    assert len(replies(telegram_sim, ALICE.id, "echo: over there")) == 1
    [turn] = await cluster.turns()
    assert (turn["status"], turn["process_id"]) == ("completed", b.process_id)
    a_stats, b_stats = a.node.stats(), b.node.stats()
    assert (a_stats.events_forwarded, b_stats.events_received) == (1, 1)
    assert b_stats.calls_relayed >= 1 and a_stats.calls_served == b_stats.calls_relayed
    assert await cluster.inbound_states() == ["done"]
    holder = await a.node.leases.holder(session_lease(ALICE_KEY))
    assert holder is not None and not holder.live  # released once idle
    assert b_stats.sessions_held == 0


async def test_a_linked_identitys_message_is_leased_under_its_persons_session(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """Alice's DMs run in ``link:dm:alice`` (gateway/control/links.py): the lease of that key, not
    of her Telegram DM's, says which process runs them, so two platforms' messages of one
    linked person can never run in two processes at once."""
    model_server.script(echo)
    a = await cluster.start("a")
    await a.store.link_identity("telegram", str(ALICE.id), "alice")
    b = await cluster.start("b")  # reads the links at its start; a reads them at its tick
    await a.node.tick()
    person = str(linked_key("alice"))
    assert await b.node.leases.acquire(session_lease(person)) is not None

    await telegram_sim.user_says(ALICE.id, "as a person")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: as a person" in m.text)
    await b.service.dispatcher.wait_idle(person)
    await b.node.claim.drain()

    [turn] = await cluster.turns(person)
    assert turn["process_id"] == b.process_id
    assert await cluster.turns(ALICE_KEY) == []
    assert a.node.stats().events_forwarded == 1


async def test_stop_received_by_the_bot_owner_stops_the_turn_running_on_the_other(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("never sent")))
    a = await cluster.start("a")
    b = await cluster.start("b")
    assert await b.node.leases.acquire(session_lease(ALICE_KEY)) is not None
    await telegram_sim.user_says(ALICE.id, "think hard")
    [request] = await model_server.wait_for_requests(1)
    assert b.service.dispatcher.status(ALICE_KEY).running

    await telegram_sim.user_says(ALICE.id, "/stop")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    await b.service.dispatcher.wait_idle(ALICE_KEY)

    assert request.closed.is_set()
    [turn] = await cluster.turns()
    assert (turn["status"], turn["process_id"]) == ("interrupted", b.process_id)
    assert replies(telegram_sim, ALICE.id, "never sent") == []
    assert a.node.stats().events_forwarded == 2
    assert not a.service.dispatcher.busy_keys


async def test_when_the_owner_stops_the_other_takes_the_bot_at_once_and_runs_what_was_left(
    cluster: Cluster,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.script(reply_hang(reply_text("from a")), echo)
    a = await cluster.start("a")
    b = await cluster.start("b")
    await telegram_sim.user_says(ALICE.id, "left behind")
    await model_server.wait_for_requests(1)
    assert a.service.dispatcher.status(ALICE_KEY).running

    await a.stop(grace=0.1)  # the turn is cut short: its update stays unfinished
    with caplog.at_level(logging.INFO, logger="gateway.cluster.node"):
        await b.node.tick()

    assert b.bot.owned
    assert f"took over bot {cluster.bot} from {a.process_id}" in caplog.text
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: left behind" in m.text)
    await b.service.dispatcher.wait_idle(ALICE_KEY)
    assert len(replies(telegram_sim, ALICE.id, "echo: left behind")) == 1
    assert replies(telegram_sim, ALICE.id, "from a") == []
    assert telegram_sim.poll_conflicts() == []
    [lease] = await cluster.fetch("SELECT owner, epoch FROM leases WHERE name = $1", cluster.bot)
    assert (lease["owner"], lease["epoch"]) == (b.process_id, 2)
    assert b.node.stats().takeovers == 1


async def test_a_paused_owner_is_taken_over_and_its_writes_are_refused_its_reply_never_sent(
    cluster: Cluster,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.script(reply_hang(reply_text("stale answer")), echo)
    a = await cluster.start("a")
    b = await cluster.start("b")
    await telegram_sim.user_says(ALICE.id, "while paused")
    [stale] = await model_server.wait_for_requests(1)

    await cluster.expire_process(a)  # paused past its lease (its own view does not know)
    await b.node.tick()
    assert b.bot.owned
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: while paused" in m.text)
    await b.service.dispatcher.wait_idle(ALICE_KEY)

    with caplog.at_level(logging.WARNING):
        model_server.release()  # the paused turn wakes up and goes on
        await a.service.dispatcher.wait_idle(ALICE_KEY)
        await a.node.tick()  # its renewal fails: it gives the bot up

    assert not stale.closed.is_set()
    assert replies(telegram_sim, ALICE.id, "stale answer") == []
    assert len(replies(telegram_sim, ALICE.id, "echo: while paused")) == 1
    assert f"lost the lease of session {ALICE_KEY}; another process runs it now" in caplog.text
    assert f"cluster: lost bot {cluster.bot}" in caplog.text
    assert not a.bot.owned
    turns = await cluster.turns()
    assert [(t["status"], t["process_id"]) for t in turns] == [
        ("failed", a.process_id),
        ("completed", b.process_id),
    ]
    assert "stopped renewing its lease" in str(turns[0]["error"])
    assert await cluster.inbound_states() == ["done"]


async def test_a_call_the_old_owner_took_and_never_answered_is_made_by_the_new_one(
    cluster: Cluster, telegram_sim: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    a = await cluster.start("a")
    b = await cluster.start("b")
    took: list[Mail] = []

    async def dies_with_it(mail: Mail) -> None:
        took.append(mail)  # taken, never performed nor answered: killed right here

    a.node.mailbox.unserve(cluster.bot)
    a.node.mailbox.serve(cluster.bot, dies_with_it)
    chat = ChatRef("telegram", str(ALICE.id))
    sending = asyncio.create_task(b.outbound.perform(Send(chat, "made once")))
    await until(lambda: bool(took))

    await cluster.expire_process(a)
    with caplog.at_level(logging.WARNING, logger="gateway.cluster.node"):
        await b.node.tick()
    sent = await asyncio.wait_for(sending, 10)

    assert sent is not None and sent.chat == chat
    assert len(replies(telegram_sim, ALICE.id, "made once")) == 1
    assert "1 call(s) the old owner never answered made again" in caplog.text
    assert b.node.stats().calls_served == 1


async def test_a_call_whose_take_an_outage_cut_off_is_made_when_the_owner_takes_its_bot_back(
    cluster: Cluster, telegram_sim: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner's take of a call committed but its rows never came back (the database
    went away): the call is marked taken and nobody makes it. When its lapsed bot lease is
    taken again — by the same process — the call is made, once."""
    a = await cluster.start("a")
    b = await cluster.start("b")
    cut_off: list[Mail] = []

    async def never_handed_over(mail: Mail) -> None:
        cut_off.append(mail)

    a.node.mailbox.unserve(cluster.bot)
    a.node.mailbox.serve(cluster.bot, never_handed_over)
    chat = ChatRef("telegram", str(ALICE.id))
    sending = asyncio.create_task(b.outbound.perform(Send(chat, "made after the outage")))
    await until(lambda: bool(cut_off))

    await cluster.expire_process(a)  # the outage outlasted the lease
    with caplog.at_level(logging.WARNING, logger="gateway.cluster.node"):
        await a.node.tick()  # renewal refused: the bot lost; then taken back, epoch 2
    sent = await asyncio.wait_for(sending, 10)

    assert a.bot.owned and sent is not None and sent.chat == chat
    assert len(replies(telegram_sim, ALICE.id, "made after the outage")) == 1
    assert "1 call(s) the old owner never answered made again" in caplog.text


async def test_a_message_sent_while_the_last_reply_is_relayed_starts_a_turn_not_a_queue(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """The user answers the reply the moment it shows, before its relayed send returned."""
    model_server.script(echo, echo)
    a = await cluster.start("a")
    b = await cluster.start("b")
    assert await b.node.leases.acquire(session_lease(ALICE_KEY)) is not None
    hold = telegram_sim.hold_next("sendMessage", lambda p: "echo: first" in str(p.get("text")))
    await telegram_sim.user_says(ALICE.id, "first")
    await hold.reached.wait()  # shown in the chat; its answer not back yet

    second = await telegram_sim.user_says(ALICE.id, "second")
    sink = b.node.claim
    await until(lambda: ("telegram", second.event_id) in sink.in_flight)
    hold.release()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: second" in m.text)

    texts = [m.text for m in telegram_sim.bot_messages(ALICE.id)]
    assert texts == ["echo: first", "echo: second"]
    assert [t["process_id"] for t in await cluster.turns()] == [b.process_id] * 2
    assert a.node.stats().events_forwarded == 2


async def test_a_session_lease_the_renewal_lost_stops_its_turn_here_without_a_word(
    cluster: Cluster,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.script(reply_hang(reply_text("never sent")))
    a = await cluster.start("a")
    name = session_lease(ALICE_KEY)
    await telegram_sim.user_says(ALICE.id, "long one")
    [request] = await model_server.wait_for_requests(1)
    held = a.node.leases.fence_of(name)
    assert held is not None

    await cluster.fetch(
        "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1",
        name,
    )
    with caplog.at_level(logging.WARNING):
        await a.node.tick()  # its renewal finds the session's lease gone
        await a.service.dispatcher.wait_idle(ALICE_KEY)

    assert request.closed.is_set()
    assert a.node.leases.fence_of(name) is None and a.node.stats().leases_lost == 1
    assert f"lost the lease of session {ALICE_KEY}" in caplog.text
    assert telegram_sim.bot_messages(ALICE.id) == []  # no reply, no "Stopped"


async def test_an_album_whose_session_the_other_holds_is_one_turn_there_and_all_parts_done(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Two pictures."))
    gate = AlbumGate()
    a = await cluster.start("a", album_sleep=gate.sleep)
    b = await cluster.start("b")
    assert await b.node.leases.acquire(session_lease(ALICE_KEY)) is not None
    parts = [Media("photo", png(2, 2)), Media("photo", png(3, 3))]
    await telegram_sim.user_sends_album(ALICE.id, parts, caption="both")
    await until(lambda: a.built[0].album_parts_waiting() == 2)
    gate.opened.set()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Two pictures" in m.text)
    await b.service.dispatcher.wait_idle(ALICE_KEY)
    await b.node.claim.drain()

    a.node.sweeper.age = 0.0
    await a.node.tick()  # nothing is left for the sweeper
    assert a.node.sweeper.redelivered == 0
    assert await cluster.inbound_states() == ["done", "done"]
    assert len(model_server.requests) == 1
    assert len(replies(telegram_sim, ALICE.id, "Two pictures")) == 1


async def test_a_bot_whose_lease_cannot_be_renewed_in_time_stops_receiving(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The database holds the heartbeat up (a lock, a slow or cut-off server) past the
    lease's local validity: the owner stops polling before another may take the bot."""
    a = await cluster.start("a", lease_seconds=1.5)
    assert a.bot.owned
    conn = await cluster.connect()
    try:
        async with conn.transaction():
            await conn.execute("SELECT 1 FROM processes WHERE id = $1 FOR UPDATE", a.process_id)
            with caplog.at_level(logging.WARNING, logger="gateway.cluster.node"):
                await a.node.tick()  # its beat waits for the row; cut off after 1.2 s
    finally:
        await conn.close()

    assert not a.bot.owned
    assert f"cluster: lost bot {cluster.bot} (not renewed in time)" in caplog.text
    assert "cluster: heartbeat failed" in caplog.text


async def test_a_session_takeover_retires_the_card_of_the_approval_it_cancelled(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """A dead process left Alice's turn waiting on an approval whose card shows Approve and
    Deny; the next message takes the session over, which cancels that approval and edits
    its card as a restart does (the notice, no buttons)."""
    model_server.script(echo)
    a = await cluster.start("a")
    outbound = a.service.directory.outbound("telegram")
    assert outbound is not None
    card = await outbound.perform(
        Send(
            ALICE_CHAT, "⚠️ Approval needed: terminal", card_buttons(REQUEST, outbound.capabilities)
        )
    )
    assert card is not None and telegram_sim.messages(ALICE.id)[-1].buttons
    await _left_waiting_by_a_dead_process(cluster, card.message_id)

    await telegram_sim.user_says(ALICE.id, "anyone there?")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo: anyone there?" in m.text)
    retired = await telegram_sim.wait_for(
        lambda: next((m for m in telegram_sim.messages(ALICE.id) if m.id == card.message_id
                      and RESTART_NOTICE in m.text), None)
    )  # fmt: skip
    assert retired.buttons == []
    [approval] = await cluster.fetch("SELECT state FROM approvals")
    assert approval["state"] == "cancelled"


ALICE_CHAT = ChatRef("telegram", str(ALICE.id))
REQUEST = ApprovalRequest(
    id="ap-dead-1", kind="approval", session_key=ALICE_KEY, session_id="s-alice",
    turn_id="t-dead", call_id="c1", tool="terminal", arguments={"command": "ls"}, prompt="",
    requested_by=None, created_at=0.0, timeout=60.0,
)  # fmt: skip


async def _left_waiting_by_a_dead_process(cluster: Cluster, message_id: str) -> None:
    """Alice's session as a process that died mid-turn left it: its lease expired, its
    turn running, an approval of that turn pending with its card shown at ``message_id``."""
    session, turn, dead = "s-alice", "t-dead", "dead/00000000"
    await cluster.fetch(
        "INSERT INTO sessions (id, key, profile, created_at, last_active_at)"
        " VALUES ($1, $2, 'default', 0, 0)", session, ALICE_KEY,
    )  # fmt: skip
    await cluster.fetch(
        "INSERT INTO turns (id, session_id, started_at, process_id) VALUES ($1, $2, 0, $3)",
        turn, session, dead,
    )  # fmt: skip
    await cluster.fetch(
        "INSERT INTO approvals (id, session_id, session_key, turn_id, tool, arguments, prompt,"
        " requested_at, card_platform, card_chat_id, card_message_id)"
        " VALUES ($1, $2, $3, $4, 'terminal', '{}', '', 0, 'telegram', $5, $6)",
        REQUEST.id, session, ALICE_KEY, turn, str(ALICE.id), message_id,
    )  # fmt: skip
    await cluster.fetch(
        "INSERT INTO leases (name, owner, epoch, expires_at)"
        " VALUES ($1, $2, 1, clock_timestamp() - interval '1 second')",
        session_lease(ALICE_KEY), dead,
    )  # fmt: skip
