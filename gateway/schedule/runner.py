"""How a claimed occurrence runs in the gateway (README "Scheduled turns"): as a turn
submitted to the :class:`core.dispatcher.Dispatcher` like a message, answered through the
same replies and outbox, with its own run and delivery status.

* **Where.** ``[schedule] session = "chat"``: the chat's own session key — queued behind a
  running turn, ``/stop`` stops it like any. ``"isolated"`` (default): a fresh key per run,
  ``<chat key>/child:job-<run id>``, which answers in the chat (the directory maps it to
  the chat) while its transcript stays apart; ``/stop`` in the chat stops it too
  (:meth:`ScheduledTurns.stop_in`).
* **Whose rights.** The creator's, at run time: one no longer allowed on the platform gets
  no run and the job is paused saying so.
* **Delivery.** The turn's reply goes out through :meth:`gateway.turns.runner.ChatTurns.on_result`
  as every reply does; :class:`ResultWatch` sees it (through the service's
  ``result_hook``) and counts the sends the platform refused
  (:data:`gateway.outbound.delivery.LOST_SENDS`,
  with the platform's reason): ``sent``, or ``failed`` with that reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from adapters.base import ChatRef
from core.agent.turn import TurnResult, UserMessage
from core.dispatcher import ResultObserver
from core.schedule.scheduler import RunOutcome
from core.store.jobs import DeliveryStatus, Job, JobBook, JobRun, RunStatus
from gateway.outbound.delivery import LOST_SENDS
from gateway.turns.replies import reply_text

if TYPE_CHECKING:
    from gateway.service import GatewayService

log = logging.getLogger(__name__)

ISOLATED_MARK = "/child:job-"
MayRun = Callable[[str, str], bool]
"""``(platform, user id)``: whether that user may use the bot now."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A scheduled turn's result and what became of its reply."""

    result: TurnResult | None
    delivery: DeliveryStatus | None
    reason: str | None = None


class ResultWatch:
    """Wraps the service's result hook: for a scheduled turn's message, notes how its reply
    was delivered; every other turn passes through untouched."""

    def __init__(self, inner: ResultObserver, has_place: Callable[[str], bool]) -> None:
        self._inner, self._has_place = inner, has_place
        self._waiting: dict[str, asyncio.Future[Finished]] = {}
        self._notes: dict[str, str] = {}

    def expect(self, origin: str, note: str | None = None) -> asyncio.Future[Finished]:
        """Watch the turn of the message from ``origin``; ``note`` heads its reply."""
        future: asyncio.Future[Finished] = asyncio.get_running_loop().create_future()
        self._waiting[origin] = future
        if note:
            self._notes[origin] = note
        return future

    def forget(self, origin: str) -> None:
        self._waiting.pop(origin, None)
        self._notes.pop(origin, None)

    async def __call__(self, key: str, message: UserMessage, result: TurnResult) -> None:
        waiter = self._waiting.pop(message.origin or "", None)
        if waiter is None:
            await self._inner(key, message, result)
            return
        note = self._notes.pop(message.origin or "", None)
        if note and result.reply and result.status != "interrupted":
            result = replace(result, reply=f"{note}\n\n{result.reply}")
        if not self._has_place(key):  # nowhere to answer: nothing would be sent
            await self._inner(key, message, result)
            _settle(waiter, Finished(result, "failed", "no chat to answer in"))
            return
        lost: list[str] = []
        token = LOST_SENDS.set(lost)
        try:
            await self._inner(key, message, result)
        except Exception as exc:
            _settle(waiter, Finished(result, "failed", str(exc) or type(exc).__name__))
            raise
        finally:
            LOST_SENDS.reset(token)
        if reply_text(result) is None:
            _settle(waiter, Finished(result, None))
        elif lost:
            _settle(waiter, Finished(result, "failed", lost[0]))
        else:
            _settle(waiter, Finished(result, "sent"))


def _settle(waiter: asyncio.Future[Finished], finished: Finished) -> None:
    if not waiter.done():
        waiter.set_result(finished)


class ScheduledTurns:
    """The scheduler's :class:`core.schedule.scheduler.JobRunner` in the gateway."""

    def __init__(
        self, service: GatewayService, book: JobBook, watch: ResultWatch, *,
        session: str, may_run: MayRun,
    ) -> None:  # fmt: skip
        self._service, self._book, self._watch = service, book, watch
        self._session, self._may_run = session, may_run
        self._running: dict[str, str] = {}
        """Session key of each isolated run going here → the chat key it answers in."""

    async def __call__(self, job: Job, run: JobRun) -> RunOutcome:
        if not self._may_run(job.platform, job.creator_user_id):
            reason = "paused: its creator may no longer use the bot"
            await self._book.set_state(job.id, "paused", reason)
            log.warning("job %s %s", job.id, reason)
            return RunOutcome("failed", reason=reason)
        key = self._key_of(job, run)
        origin = f"schedule:{run.id}"
        self._service.directory.expect(origin, key, _chat_of(job))
        message = UserMessage(
            _prompt(job, run), sender_id=f"{job.platform}:{job.creator_user_id}",
            origin=origin,
        )  # fmt: skip
        finished = self._watch.expect(origin, run.note)
        if key != job.session_key:
            self._running[key] = job.session_key
        try:
            submitted = self._service.dispatcher.submit(key, message, policy="queue")
            if submitted.handled is not None:
                either: set[asyncio.Future[Any]] = {submitted.handled, finished}
                await asyncio.wait(either, return_when="FIRST_COMPLETED")
            if not finished.done():  # refused by the lane, or dropped from its queue
                if submitted.kind.startswith("rejected"):
                    return RunOutcome("failed", reason=f"not run: {submitted.kind}")
                return RunOutcome("stopped")
            return _outcome(finished.result(), self._service, key)
        finally:
            self._watch.forget(origin)
            self._running.pop(key, None)

    def stop_in(self, chat_key: str) -> int:
        """``/stop`` in a chat: stop the isolated scheduled runs answering there; how many."""
        stopped = 0
        for key, chat in list(self._running.items()):
            if chat == chat_key:
                turn_id = self._service.dispatcher.status(key).turn_id
                if self._service.dispatcher.stop(key):
                    if turn_id:
                        self._service.stopped_turns.acknowledge(turn_id)
                    stopped += 1
        return stopped

    def _key_of(self, job: Job, run: JobRun) -> str:
        if self._session == "chat":
            return job.session_key
        return f"{job.session_key}{ISOLATED_MARK}{run.id}"


def _outcome(finished: Finished, service: GatewayService, key: str) -> RunOutcome:
    result = finished.result
    status: RunStatus = "succeeded"
    if result is None or result.status == "failed":
        status = "failed"
    elif result.status == "interrupted" or service.stopped_turns.was_stopped(result.turn_id):
        status = "stopped"
    reason = finished.reason if finished.delivery == "failed" else None
    if status == "failed" and reason is None and result is not None:
        reason = result.error
    return RunOutcome(status, finished.delivery, reason)


def _prompt(job: Job, run: JobRun) -> str:
    if run.note:
        return f"{job.prompt}\n\n{run.note}"
    return job.prompt


def _chat_of(job: Job) -> ChatRef:
    return ChatRef(job.platform, job.chat_id, job.thread_id)
