"""Usage end to end on Slack (README "Usage and quotas"), composed as ``commonos run``
composes it: each model call's row carries the scripted server's usage exactly, the
sender and the chat; ``/usage`` shows the asker their own figures, and an approver also
the top people and chats — a non-approver never sees them."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from core.store.usage import UsageBook
from tests.platform_sim.slack_sim import ALICE, BOB, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer


async def test_usage_rows_match_the_servers_usage_and_usage_shows_top_people_to_approvers(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(
        reply_text("for alice", usage=(2048, 30), cached_tokens=1024),
        reply_text("for bob", usage=(990, 10)),
    )
    run = await slack_gateway("socket", approvers=[ALICE.id])
    alice_dm, bob_dm = slack_sim.dm_channel(ALICE), slack_sim.dm_channel(BOB)
    await slack_sim.user_says(alice_dm, "hi")
    await slack_sim.wait_for_bot_message(alice_dm, lambda m: m.text == "for alice")
    await slack_sim.user_says(bob_dm, "hi", user=BOB)
    await slack_sim.wait_for_bot_message(bob_dm, lambda m: m.text == "for bob")
    await run.idle(f"slack:dm:{bob_dm}")
    rows = await UsageBook(store).rows()
    assert [(r.person, r.chat, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
             r.estimated) for r in rows] == [
        (f"slack:{ALICE.id}", f"slack:dm:{alice_dm}", 2048, 1024, 30, False),
        (f"slack:{BOB.id}", f"slack:dm:{bob_dm}", 990, 0, 10, False),
    ]  # fmt: skip

    await slack_sim.user_says(bob_dm, "!usage", user=BOB)
    bobs = await slack_sim.wait_for_bot_message(bob_dm, lambda m: "Your model usage" in m.text)
    assert "Today: 1,000 tokens (990 in, 0 cached, 10 out)" in bobs.text
    assert "Top people" not in bobs.text and ALICE.id not in bobs.text
    await slack_sim.user_says(alice_dm, "!usage")
    alices = await slack_sim.wait_for_bot_message(alice_dm, lambda m: "Your model usage" in m.text)
    assert "Today: 2,078 tokens (2,048 in, 1,024 cached, 30 out)" in alices.text
    assert "Everyone this month: 3,078 tokens" in alices.text
    assert f"1. slack:{ALICE.id}: 2,078 tokens" in alices.text
    assert f"2. slack:{BOB.id}: 1,000 tokens" in alices.text
    assert f"2. slack:dm:{bob_dm}: 1,000 tokens" in alices.text
    assert len(model_server.requests) == 2
