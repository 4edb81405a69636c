"""End to end on Slack (the gateway composed by the wiring with ``[schedule] enabled``, its
scheduler on a manual clock): the ``/cron``
slash command in a channel makes a job that runs and answers in that channel; ``/jobs``
shows it (README "Scheduled turns")."""

from __future__ import annotations

from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.schedule import retimed


async def test_cron_in_a_channel_runs_and_answers_in_that_channel(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Open PRs: none."))
    run = await slack_gateway("socket", sections={"schedule": {"enabled": True}})
    feature, clock = await retimed(run.service)
    try:
        await slack_sim.use_command(GENERAL, "/cron", '"0 9 * * *" summarise open PRs', user=ALICE)
        await slack_sim.wait_for_bot_message(GENERAL, lambda m: "next 2027-01-15 09:00" in m.text)
        await clock.advance(3600)
        await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "Open PRs: none.")
        await feature.scheduler.drain()
        (job,) = await feature.book.jobs()
        (ran,) = await feature.book.runs_of(job.id)
        assert (job.platform, job.chat_id, ran.status, ran.delivery) == (
            "slack", GENERAL, "succeeded", "sent",
        )  # fmt: skip
    finally:
        await feature.aclose()
