"""End to end (Telegram simulator, scripted model, a manual clock): scheduled turns
(issue 31, README "Scheduled turns"). /every, /at and /cron from a chat make jobs that run
and answer in that chat; /jobs shows them; a chat that now refuses (403) is recorded
failed and the job pauses after the configured count; /stop stops a running scheduled
turn; a run the gateway was killed during is marked, never run again."""

from __future__ import annotations

from gateway.config.schedule import ScheduleSection
from gateway.schedule.feature import ScheduleFeature
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.support.polling import until
from tests.support.schedule import scheduled
from tests.telegram.harness import GatewayFactory


async def bot_says(sim: TelegramSim, chat: int, part: str) -> str:
    message = await sim.wait_for_bot_message(chat, lambda m: part in (m.text or ""))
    return message.text or ""


async def test_every_at_and_cron_run_and_answer_in_the_chat_they_were_made_in(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_text("Stretch now."), reply_text("Call mum now."), reply_text("PR summary.")
    )
    run = await gateway()
    feature, clock = await scheduled(run.service)
    try:
        await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
        made = await bot_says(telegram_sim, ALICE.id, "⏰ Job")
        assert "next 2027-01-15 09:00" in made
        await telegram_sim.user_says(ALICE.id, "/at 09:30 call mum")
        await bot_says(telegram_sim, ALICE.id, "call mum; next 2027-01-15 09:30")
        await telegram_sim.user_says(ALICE.id, '/cron "0 10 * * *" PR summary')
        await bot_says(telegram_sim, ALICE.id, "PR summary; next 2027-01-15 10:00")
        await clock.advance(3600)  # 09:00
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Stretch now.")
        await clock.advance(1800)  # 09:30
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Call mum now.")
        await feature.scheduler.drain()
        assert model_server.requests[0].messages[-1]["content"] == "stretch"
        await telegram_sim.user_says(ALICE.id, "/jobs")
        listed = await bot_says(telegram_sim, ALICE.id, "last: succeeded, delivery sent")
        assert "call mum" not in listed  # the one-shot ended
        assert "stretch" in listed and "PR summary" in listed
        await telegram_sim.user_says(BOB.id, "/jobs")
        await bot_says(telegram_sim, BOB.id, "No jobs")
    finally:
        await feature.aclose()


async def test_a_stranger_cannot_touch_a_job_the_creator_can(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Ran now."))
    run = await gateway()
    feature, _ = await scheduled(run.service)
    try:
        await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
        made = await bot_says(telegram_sim, ALICE.id, "⏰ Job")
        job_id = made.split()[2].rstrip(":")
        await telegram_sim.user_says(BOB.id, f"/jobs delete {job_id}")
        await bot_says(telegram_sim, BOB.id, f"No job {job_id} of yours")
        await telegram_sim.user_says(ALICE.id, f"/jobs pause {job_id}")
        await bot_says(telegram_sim, ALICE.id, "paused")
        await telegram_sim.user_says(ALICE.id, f"/jobs run {job_id}")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Ran now.")
        await telegram_sim.user_says(ALICE.id, f"/jobs delete {job_id}")
        await bot_says(telegram_sim, ALICE.id, "deleted")
        assert await feature.book.jobs() == []
    finally:
        await feature.aclose()


async def test_a_chat_that_refuses_403_is_recorded_and_the_job_pauses(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("One."), reply_text("Two."))
    run = await gateway()
    feature, clock = await scheduled(run.service, pause_after_failed_deliveries=2)
    try:
        await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
        await bot_says(telegram_sim, ALICE.id, "⏰ Job")
        (job,) = await feature.book.jobs()
        telegram_sim.block_bot(ALICE.id)
        for started in (1, 2):
            await clock.advance(3600)
            await until(lambda n=started: feature.scheduler.figures.starts == n)  # type: ignore[misc]
            await feature.scheduler.drain()
        runs = await feature.book.runs_of(job.id)
        assert [(r.status, r.delivery) for r in runs] == [("succeeded", "failed")] * 2
        assert runs[0].delivery_reason is not None and "blocked" in runs[0].delivery_reason
        paused = await feature.book.job(job.id)
        assert paused is not None and paused.state == "paused"
        assert "2 answers in a row undeliverable" in (paused.state_reason or "")
        figures = feature.scheduler.figures  # what /metrics shows
        assert (figures.runs, figures.deliveries) == ({"succeeded": 2}, {"failed": 2})
    finally:
        await feature.aclose()


async def test_the_models_schedule_tool_sets_a_reminder_that_fires_in_the_chat(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("schedule", {"prompt": "Tell Alice to stretch.", "at": "10m"}),
        reply_text("Reminder set."),
        reply_text("Time to stretch, Alice!"),
    )
    run = await gateway()
    feature, clock = await scheduled(run.service)
    try:
        await telegram_sim.user_says(ALICE.id, "remind me to stretch in 10 minutes")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Reminder set.")
        made = model_server.requests[1].messages[-1]["content"]
        assert "Tell Alice to stretch.; next 2027-01-15 08:10" in made
        await clock.advance(600)
        await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: m.text == "Time to stretch, Alice!"
        )
        assert model_server.requests[2].messages[-1]["content"] == "Tell Alice to stretch."
        await feature.scheduler.drain()
        (job,) = await feature.book.jobs()
        assert (job.person, job.chat_id, job.state) == (
            f"telegram:{ALICE.id}",
            str(ALICE.id),
            "ended",
        )
    finally:
        await feature.aclose()


async def test_killed_mid_run_the_occurrence_is_marked_interrupted_never_run_again(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(then=reply_text("Too late.")), reply_text("Stretch at 10."))
    first = await gateway()
    feature, clock = await scheduled(first.service)
    await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
    await bot_says(telegram_sim, ALICE.id, "⏰ Job")
    await clock.advance(3600)  # 09:00: the run starts, its model call hangs
    await model_server.wait_for_requests(1)
    await feature.aclose()  # the process dies: nothing after the claim is recorded
    await first.stop(grace=0)
    second = await gateway()
    again = ScheduleFeature(
        second.service, ScheduleSection(enabled=True), clock=clock.now, sleep=clock.sleep,
        owner="second",
    )  # fmt: skip
    await again.start()
    try:
        (job,) = await again.book.jobs()
        await clock.advance(61)  # the dead run's lease (60 s) has expired
        await again.scheduler.tick()
        (run,) = await again.book.runs_of(job.id)
        assert (run.status, run.owner) == ("interrupted", "test")
        await clock.advance(3600 - 61)  # 10:00
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Stretch at 10.")
        await again.scheduler.drain()
        runs = await again.book.runs_of(job.id)
        assert [r.status for r in runs] == ["succeeded", "interrupted"]
        assert len(model_server.requests) == 2  # 09:00 was asked once, never again
        await telegram_sim.user_says(ALICE.id, "/jobs")
        await bot_says(telegram_sim, ALICE.id, "last: succeeded")
    finally:
        await again.aclose()
        model_server.release()


async def test_down_across_three_occurrences_one_catch_up_says_what_was_missed(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Stretch, late."))
    first = await gateway()
    feature, clock = await scheduled(first.service)
    await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
    await bot_says(telegram_sim, ALICE.id, "⏰ Job")
    await feature.aclose()
    await first.stop()
    clock.now_s += 3 * 3600 + 600  # down from 08:00 to 11:10: 09:00, 10:00, 11:00 missed
    second = await gateway()
    again = ScheduleFeature(
        second.service, ScheduleSection(enabled=True), clock=clock.now, sleep=clock.sleep,
        owner="second",
    )  # fmt: skip
    await again.start()
    try:
        note = "(missed 3 times from 09:00 while the gateway was down)"
        answer = await bot_says(telegram_sim, ALICE.id, "Stretch, late.")
        assert answer == f"{note}\n\nStretch, late."
        await again.scheduler.drain()
        assert len(model_server.requests) == 1  # one catch-up, not three
        assert note in model_server.requests[0].messages[-1]["content"]
    finally:
        await again.aclose()


async def test_stop_in_the_chat_stops_a_running_isolated_scheduled_turn(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang())
    run = await gateway()
    feature, clock = await scheduled(run.service)
    try:
        await telegram_sim.user_says(ALICE.id, "/every 1h check the build")
        await bot_says(telegram_sim, ALICE.id, "⏰ Job")
        await clock.advance(3600)
        await model_server.wait_for_requests(1)  # the scheduled turn runs, in its own session
        await telegram_sim.user_says(ALICE.id, "/stop")
        await bot_says(telegram_sim, ALICE.id, "Stopped the scheduled run")
        await feature.scheduler.drain()
        (job,) = await feature.book.jobs()
        (stopped,) = await feature.book.runs_of(job.id)
        assert (stopped.status, stopped.delivery) == ("stopped", None)
    finally:
        await feature.aclose()
        model_server.release()


async def test_a_chat_session_run_sees_the_chats_history(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello."), reply_text("Stretch, as we said."))
    run = await gateway()
    feature, clock = await scheduled(run.service, session="chat")
    try:
        await telegram_sim.user_says(ALICE.id, "remember: I stretch hourly")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Hello.")
        await telegram_sim.user_says(ALICE.id, "/every 1h stretch")
        await bot_says(telegram_sim, ALICE.id, "⏰ Job")
        await clock.advance(3600)
        await bot_says(telegram_sim, ALICE.id, "Stretch, as we said.")
        said = [m["content"] for m in model_server.requests[1].messages if m["role"] == "user"]
        assert said == ["remember: I stretch hourly", "stretch"]
    finally:
        await feature.aclose()


async def test_a_creator_no_longer_allowed_gets_no_run_and_the_job_pauses(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    first = await gateway()
    feature, clock = await scheduled(first.service)
    await telegram_sim.user_says(BOB.id, "/every 1h stretch")
    await bot_says(telegram_sim, BOB.id, "⏰ Job")
    await feature.aclose()
    await first.stop()
    second = await gateway(allowed_users=frozenset({str(ALICE.id)}))  # Bob taken off the list
    again, _ = await scheduled(second.service, clock=clock, owner="second")
    try:
        await clock.advance(3600)
        await until(lambda: again.scheduler.figures.runs["failed"] == 1)
        (job,) = await again.book.jobs()
        assert (job.state, job.state_reason) == (
            "paused", "paused: its creator may no longer use the bot",
        )  # fmt: skip
        assert model_server.requests == []
    finally:
        await again.aclose()


async def test_a_profile_that_asks_first_shows_a_card_before_the_tool_makes_the_job(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("schedule", {"prompt": "Tell Alice to stretch.", "every": "1h"}),
        reply_text("Set."),
    )
    run = await gateway()
    feature, _ = await scheduled(run.service, ask_in_profiles=["default"])
    try:
        await telegram_sim.user_says(ALICE.id, "remind me hourly to stretch")
        card = await telegram_sim.wait_for_bot_message(
            ALICE.id, lambda m: "Schedule a job (every 1h)" in m.text and bool(m.buttons)
        )
        assert await feature.book.jobs() == []  # nothing made before the press
        await telegram_sim.press_button(card, card.button("✅ Approve").data or "", user=ALICE)
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Set.")
        (job,) = await feature.book.jobs()
        assert (job.kind, job.spec, job.prompt) == ("every", "3600", "Tell Alice to stretch.")
    finally:
        await feature.aclose()
