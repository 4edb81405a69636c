"""Relaying calls to a bot's owner (gateway/cluster/relay.py) through real mailboxes on a
real PostgreSQL server: two Relay/Mailbox pairs stand for two processes, A owning the bot
and B asking it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.base import AdapterError, ChatRef, Forbidden, RateLimited, SentMessage
from adapters.calls import Call, Send, SendFile, Typing
from core import tracing
from core.attachments import OutgoingFile
from core.store.fencing import Fence, Fenced, fenced
from gateway.cluster.codec import encode_call
from gateway.cluster.mailbox import Mail, Mailbox
from gateway.cluster.relay import CALL, Relay
from gateway.otel import OtelTracer
from tests.cluster.pg_pool import cluster_pool
from tests.support.polling import until
from tests.support.postgres import PostgresServer

A, B = "a/00000001", "b/00000002"
BOT = "bot:telegram:0123456789ab"
CHAT = ChatRef("telegram", "42")


@pytest.fixture
async def pool(pg_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with cluster_pool(pg_url) as opened:
        yield opened


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def _exists(path: str) -> bool:
    return Path(path).exists()


@dataclass
class Owner:
    """What process A's Outbound would do with relayed calls: record, answer, or raise."""

    calls: list[Call] = field(default_factory=list)
    raises: BaseException | None = None
    gate: asyncio.Event | None = None
    files: list[bytes] = field(default_factory=list)

    async def perform(self, call: Call) -> SentMessage | None:
        self.calls.append(call)
        if isinstance(call, SendFile):
            self.files.append(_read(call.file.path))
        if self.gate is not None and isinstance(call, Send) and call.text == "slow":
            await self.gate.wait()
        if self.raises is not None:
            raise self.raises
        return (
            SentMessage(call.chat, str(len(self.calls)))
            if isinstance(call, Send | SendFile)
            else None
        )


@dataclass
class Pair:
    owner: Owner
    a: Relay
    b: Relay
    a_mail: Mailbox
    b_mail: Mailbox


@pytest.fixture
async def pair(pool: asyncpg.Pool, pg_url: str, tmp_path: Path) -> AsyncIterator[Pair]:
    a_mail, b_mail = Mailbox(pool, pg_url, A), Mailbox(pool, pg_url, B)
    a = Relay(a_mail, A, spool=tmp_path / "spool")
    b = Relay(b_mail, B, timeout=5.0)
    owner = Owner()
    a_mail.serve(BOT, a.executor(owner.perform))
    a_mail.serve(A, a.on_result)
    b_mail.serve(B, b.on_result)
    await a_mail.start()
    await b_mail.start()
    try:
        yield Pair(owner, a, b, a_mail, b_mail)
    finally:
        for relay, mailbox in ((a, a_mail), (b, b_mail)):
            await relay.aclose()
            await mailbox.aclose()


async def test_a_send_is_made_by_the_owner_and_its_message_comes_back(pair: Pair) -> None:
    call = Send(CHAT, "hello from B", key="chunk-1")
    sent = await pair.b.perform(BOT, call)
    assert pair.owner.calls == [call]
    assert sent == SentMessage(CHAT, "1")
    assert (pair.b.stats.relayed, pair.a.stats.served) == (1, 1)


async def test_a_call_returning_none_comes_back_none(pair: Pair) -> None:
    assert await pair.b.perform(BOT, Typing(CHAT)) is None
    assert pair.owner.calls == [Typing(CHAT)]


async def test_the_owners_error_is_raised_at_the_requester_as_the_same_class(pair: Pair) -> None:
    pair.owner.raises = Forbidden("telegram: bot was blocked by the user")
    with pytest.raises(Forbidden, match=r"^telegram: bot was blocked by the user$"):
        await pair.b.perform(BOT, Send(CHAT, "x"))
    limited = RateLimited(7, "telegram: flood")
    limited.final = True
    pair.owner.raises = limited
    with pytest.raises(RateLimited) as caught:
        await pair.b.perform(BOT, Send(CHAT, "x"))
    assert (caught.value.retry_after, caught.value.final) == (7, True)


async def test_an_error_outside_the_tree_is_still_answered_as_an_adapter_error(
    pair: Pair,
) -> None:
    pair.owner.raises = ValueError("button payload is 65 bytes, Telegram allows 64")
    with pytest.raises(AdapterError, match="Send failed at the bot's owner: ValueError: button"):
        await pair.b.perform(BOT, Send(CHAT, "x"))


async def test_calls_are_made_side_by_side_at_the_owner(pair: Pair) -> None:
    """A call held by the owner's scheduler does not hold the next relayed call back."""
    pair.owner.gate = asyncio.Event()
    slow = asyncio.create_task(pair.b.perform(BOT, Send(CHAT, "slow")))
    assert await pair.b.perform(BOT, Send(CHAT, "fast")) is not None
    assert not slow.done()
    pair.owner.gate.set()
    assert await slow is not None


async def test_a_file_travels_to_the_owner_and_its_spooled_copy_is_removed(
    pair: Pair, tmp_path: Path
) -> None:
    content = b"\x00\xff" * 40_000
    path = tmp_path / "photo.png"
    path.write_bytes(content)
    file = OutgoingFile("f1", str(path), "photo.png", "image/png", len(content), "photo")
    sent = await pair.b.perform(BOT, SendFile(CHAT, file, "a photo"))
    assert sent is not None and pair.owner.files == [content]
    [made] = pair.owner.calls
    assert isinstance(made, SendFile) and made.file.name == "photo.png"
    assert not _exists(made.file.path)


async def test_no_owner_answering_is_an_adapter_error_after_the_timeout(
    pool: asyncpg.Pool, pg_url: str
) -> None:
    mailbox = Mailbox(pool, pg_url, B)
    relay = Relay(mailbox, B, timeout=1.0)
    mailbox.serve(B, relay.on_result)
    await mailbox.start()
    try:
        with pytest.raises(AdapterError, match="the owner of telegram did not answer Send"):
            await relay.perform(BOT, Send(CHAT, "x"))
        assert relay.stats.timeouts == 1
    finally:
        await relay.aclose()
        await mailbox.aclose()


async def test_closing_fails_the_calls_still_waiting(pool: asyncpg.Pool, pg_url: str) -> None:
    mailbox = Mailbox(pool, pg_url, B)
    relay = Relay(mailbox, B, timeout=30.0)
    await mailbox.start()
    try:
        waiting = asyncio.create_task(relay.perform(BOT, Send(CHAT, "x")))
        await until(lambda: relay.stats.relayed == 1)
        await relay.aclose()
        with pytest.raises(AdapterError, match="relay closed before the owner answered"):
            await waiting
        with pytest.raises(AdapterError, match="not relayed: stopping"):
            await relay.perform(BOT, Send(CHAT, "y"))
    finally:
        await mailbox.aclose()


async def test_a_stale_requester_relays_nothing(pair: Pair, pool: asyncpg.Pool) -> None:
    """Under a fence whose lease is not held, the call is refused before any mail."""
    with fenced(Fence("session:telegram:dm:42", B, 3)), pytest.raises(Fenced):
        await pair.b.perform(BOT, Send(CHAT, "x"))
    assert await pool.fetchval("SELECT count(*) FROM cluster_mail") == 0
    assert pair.owner.calls == []


async def test_an_unreadable_call_is_answered_with_an_error(pair: Pair) -> None:
    answers: list[Mail] = []
    got = asyncio.Event()

    async def collect(mail: Mail) -> None:
        answers.append(mail)
        got.set()

    pair.b_mail.serve(B, collect)
    await pair.b_mail.send(BOT, "call", json.dumps({"id": "x-1", "call": '{"kind": "fly"}'}))
    await got.wait()
    [answer] = answers
    assert (answer.kind, answer.sender) == ("result", A)
    outcome = json.loads(answer.payload)
    assert outcome["id"] == "x-1"
    assert "unknown kind 'fly'" in json.loads(outcome["outcome"])["error"]["message"]
    assert pair.owner.calls == []


async def test_a_store_that_cannot_take_the_call_is_an_adapter_error(pg_url: str) -> None:
    async with cluster_pool(pg_url) as pool:
        mailbox = Mailbox(pool, pg_url, B)
        relay = Relay(mailbox, B, timeout=5.0)
    with pytest.raises(AdapterError, match=r"^Send to telegram not relayed: the store did not"):
        await relay.perform(BOT, Send(CHAT, "x"))
    assert relay.stats.relayed == 0
    await relay.aclose()


async def test_odd_text_crosses_the_store_exactly(pair: Pair) -> None:
    call = Send(CHAT, "nul \x00, lone \ud800 and \udfff, emoji 👀, " + "ü" * 5000)
    await pair.b.perform(BOT, call)
    assert pair.owner.calls == [call]


async def test_the_owners_span_of_a_relayed_call_is_in_the_askers_trace(pair: Pair) -> None:
    """A turn on B whose reply the bot's owner A makes: A's platform.call span is a child of
    B's span (the trace context crosses in the mail), so one turn stays one trace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    made = pair.owner.perform

    async def traced(call: Call) -> SentMessage | None:
        async with tracing.span("platform.call", **{"call.kind": "send"}):
            return await made(call)

    pair.owner.perform = traced  # type: ignore[method-assign]
    pair.a_mail.serve(BOT, pair.a.executor(pair.owner.perform))
    tracing.install(OtelTracer(provider))
    try:
        async with tracing.trace("turn"):
            await pair.b.perform(BOT, Send(CHAT, "traced"))
        await pair.b.perform(BOT, Send(CHAT, "outside any turn"))
    finally:
        tracing.install(None)
        provider.shutdown()
    finished = exporter.get_finished_spans()
    [turn] = [span for span in finished if span.name == "turn"]
    joined, alone = [span for span in finished if span.name == "platform.call"]
    assert joined.context.trace_id == turn.context.trace_id
    assert joined.parent is not None and joined.parent.span_id == turn.context.span_id
    assert alone.context.trace_id != turn.context.trace_id and alone.parent is None


async def test_a_call_mail_with_a_malformed_trace_is_still_made(pair: Pair) -> None:
    tracing.install(OtelTracer(TracerProvider()))
    try:
        call = Send(CHAT, "made anyway")
        payload = {"id": "b-odd", "call": encode_call(call), "trace": ["not", "a", "carrier"]}
        await pair.b_mail.send(BOT, "call", json.dumps(payload))
        await until(lambda: pair.a.stats.served == 1)
    finally:
        tracing.install(None)
    assert pair.owner.calls == [call]


async def test_a_call_the_store_cannot_take_is_kept_and_made_once_when_it_is_back(
    pg_server: PostgresServer, pair: Pair
) -> None:
    """PostgreSQL stopped: B's call mail waits in memory (held), and once the server is
    back it is stored, made by the owner once, and its message comes back."""
    call = Send(CHAT, "kept through the outage", key="chunk-9")
    await asyncio.to_thread(pg_server.halt)
    try:
        asking = asyncio.create_task(pair.b.perform(BOT, call))
        await until(lambda: pair.b.stats.held == 1)
        assert not asking.done() and pair.owner.calls == []
    finally:
        await asyncio.to_thread(pg_server.resume)
    sent = await asking
    assert sent == SentMessage(CHAT, "1")
    assert pair.owner.calls == [call]
    assert (pair.b.stats.relayed, pair.a.stats.served) == (1, 1)


async def test_a_call_stored_twice_by_a_cut_off_send_is_made_once(pair: Pair) -> None:
    """A send cut off by an outage may have been stored after all and is sent again: the
    owner makes the call id once, and the first answer settles the requester."""
    call = Send(CHAT, "once")
    mail = json.dumps({"id": "b-1", "call": encode_call(call), "trace": {}})
    await pair.b_mail.send(BOT, CALL, mail)
    await pair.b_mail.send(BOT, CALL, mail)
    # both mails handled: the duplicate seen (it may be seen while the first is still
    # being made) and the first made
    await until(lambda: pair.a.stats.twice == 1 and pair.a.stats.served == 1)
    assert pair.owner.calls == [call]
