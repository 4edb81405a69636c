"""Usage accounting and quotas on the turn loop (issue 33, ``docs/turn-loop.md`` §4): every
model call's usage recorded as the scripted server reported it — turns, a child agent's
calls, a compaction summary — and the quota asked before each call, on a test clock."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import TurnResult, UserMessage
from core.model.retry import RetryPolicy
from core.store.usage import UsageBook
from gateway.config.quotas import QuotaLimits, QuotasSection
from gateway.control.usage.meter import GatewayMeter, Preset, Price
from gateway.control.usage.quota import QuotaRule
from tests.engine.conftest import KEY, USER, Rig
from tests.engine.test_turn_child import delegate_tool
from tests.support.model_server import ReceivedRequest, Reply, reply_text, reply_tool_call

DAY = 86_400.0
PRICE = Price(input=2.0, cached=0.5, output=8.0)


def meter_of(rig: Rig, quotas: QuotasSection | None = None, approvers: Any = ()) -> GatewayMeter:
    book = UsageBook(rig.store)
    rule = None
    if quotas is not None:
        rule = QuotaRule(quotas, book, lambda key: approvers, rig.clock)
    presets = {"test-model": Preset("cheap", PRICE)}
    return GatewayMeter(book, "test", presets, quotas=rule, clock=rig.clock)


def metered(rig: Rig, meter: GatewayMeter, **profile: Any) -> CommonAgent:
    return CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals,
        replace(rig.profile, **profile), clock=rig.clock,
        retry=RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0), meter=meter,
    )  # fmt: skip


async def turn(agent: CommonAgent, text: str, user: str = USER, key: str = KEY) -> TurnResult:
    return await agent.run_turn(key, UserMessage(text, sender_id=user), TurnControl())


def numbered(request: ReceivedRequest) -> Reply:
    """An answer whose usage is made of the request's number, so each row is known."""
    n = request.index
    usage = (1000 + 17 * n, 5 + n % 11)
    if "delegate" in str(request.messages[-1].get("content")) and n < 50:
        return reply_tool_call("delegate", {"task": "look it up"}, id="d1", usage=usage)
    return reply_text(f"answer {n}", usage=usage, cached_tokens=(13 * n) % 900)


async def test_usage_rows_match_the_servers_usage_over_100_turns_with_a_child_and_a_summary(
    rig: Rig,
) -> None:
    delegate_tool(rig)
    meter = meter_of(rig)
    plain, streaming = metered(rig, meter), metered(rig, meter, stream=True, context_window=32768)
    rig.server.script(*[numbered] * 110)
    for number in range(100):
        agent = streaming if number % 2 else plain
        text = "please delegate this" if number == 10 else f"message {number}"
        assert (await turn(agent, text)).status == "completed"
    assert await streaming.compact(KEY) is not None

    rows = await UsageBook(rig.store).rows()
    requests = rig.server.requests
    assert len(rows) == len(requests) == 103  # 100 answers, the delegate's 2 more, a summary
    for row, request in zip(rows, requests, strict=True):
        n = request.index
        cached = 0 if n == 10 else (13 * n) % 900
        assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (
            1000 + 17 * n, 5 + n % 11, cached,
        )  # fmt: skip
        assert not row.estimated
        assert (row.profile, row.model, row.chat) == ("test", "cheap", KEY)
        fresh = row.prompt_tokens - row.cached_tokens
        cost = (fresh * 2.0 + row.cached_tokens * 0.5 + row.completion_tokens * 8.0) / 1e6
        assert row.cost is not None and abs(row.cost - cost) < 1e-12
    child = rows[11]
    assert child.session_key.startswith(f"{KEY}/child:") and child.person == USER
    summary = rows[-1]
    assert (summary.turn_id, summary.person) == ("", None)


async def test_a_server_that_gives_no_usage_is_estimated_and_marked(rig: Rig) -> None:
    meter = meter_of(rig)
    body = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"hi there"}}]}'
    rig.server.script(Reply(body=body))

    await turn(metered(rig, meter), "hello")

    (row,) = await UsageBook(rig.store).rows()
    assert row.estimated and row.prompt_tokens > 0 and row.completion_tokens == 2


async def test_llama_server_timings_cache_n_is_the_cached_count(rig: Rig) -> None:
    meter = meter_of(rig)
    rig.server.report_cache_reuse = True
    rig.server.script(reply_text("one", usage=(50, 3)), reply_text("two", usage=(60, 3)))
    agent = metered(rig, meter)
    await turn(agent, "first")
    await turn(agent, "second")

    first, second = await UsageBook(rig.store).rows()
    assert first.cached_tokens == 0 and second.cached_tokens == rig.server.cache_reuse[1] > 0


DAILY = QuotasSection(person=QuotaLimits(daily_tokens=1000))


async def test_a_person_at_the_daily_quota_gets_the_quota_reply_and_no_request(rig: Rig) -> None:
    agent = metered(rig, meter_of(rig, DAILY))
    rig.clock.now = 1_800_000_000.0  # 2027-01-15 08:00 UTC
    rig.server.script(reply_text("sure", usage=(900, 100)), reply_text("bob's answer"))
    assert (await turn(agent, "spend")).reply == "sure"

    refused = await turn(agent, "more")

    assert (refused.status, refused.exit_reason) == ("budget_exhausted", "quota_exceeded")
    assert refused.reply == (
        "⛔ You have reached your daily quota of 1,000 tokens (1,000 tokens used). "
        "It resets at 2027-01-16 00:00 UTC."
    )
    assert len(rig.server.requests) == 1
    other = await turn(agent, "hello", user="telegram:bob", key="test:dm:2")
    assert other.reply == "bob's answer" and len(rig.server.requests) == 2


async def test_the_daily_quota_resets_at_midnight_in_the_configured_zone(rig: Rig) -> None:
    berlin = QuotasSection(timezone="Europe/Berlin", person=QuotaLimits(daily_tokens=1000))
    agent = metered(rig, meter_of(rig, berlin))
    rig.clock.now = 1_800_000_000.0 + 14 * 3600  # 2027-01-15 23:00 Berlin (22:00 UTC)
    rig.server.script(reply_text("a", usage=(1000, 0)), reply_text("b"))
    await turn(agent, "spend")
    refused = await turn(agent, "more")
    assert refused.reply is not None and "2027-01-16 00:00 CET" in refused.reply

    rig.clock.advance(3599)  # 23:59:59: still today
    assert (await turn(agent, "more")).exit_reason == "quota_exceeded"
    rig.clock.advance(1)  # midnight in Berlin
    assert (await turn(agent, "again")).reply == "b"


async def test_a_turn_crossing_its_quota_finishes_the_call_then_stops(rig: Rig) -> None:
    agent = metered(rig, meter_of(rig, DAILY))
    rig.server.script(reply_tool_call("echo", {"text": "x"}, usage=(1500, 20)), reply_text("no"))

    result = await turn(agent, "go")

    assert result.exit_reason == "quota_exceeded" and "daily quota" in (result.reply or "")
    assert len(rig.server.requests) == 1
    assert [m.role for m in await rig.stored()] == ["user", "assistant", "tool"]


async def test_approvers_are_exempt_unless_given_their_own(rig: Rig) -> None:
    rig.server.script(*[reply_text("ok", usage=(2000, 0))] * 4)
    exempt = metered(rig, meter_of(rig, DAILY, approvers={USER}))
    for _ in range(2):
        assert (await turn(exempt, "go")).reply == "ok"
    own = replace(DAILY, approvers=QuotaLimits(daily_tokens=3000))
    capped = metered(rig, meter_of(rig, own, approvers={USER}))
    assert (await turn(capped, "go")).exit_reason == "quota_exceeded"


async def test_a_chat_quota_counts_every_member(rig: Rig) -> None:
    chat = QuotasSection(chat=QuotaLimits(monthly_tokens=1000))
    agent = metered(rig, meter_of(rig, chat))
    group = "telegram:group:-100"
    rig.server.script(reply_text("a", usage=(600, 0)), reply_text("b", usage=(600, 0)))
    await turn(agent, "one", user="telegram:1", key=group)
    await turn(agent, "two", user="telegram:2", key=group)

    refused = await turn(agent, "three", user="telegram:3", key=group)

    assert refused.reply is not None
    assert refused.reply.startswith("⛔ This chat has reached this chat's monthly quota")
    assert "It resets at 2027-02-01 00:00 UTC." in refused.reply
