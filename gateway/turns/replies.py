"""A finished turn's reply, rendered, chunked and sent exactly once.

The service hands each result here once the Dispatcher reports it (:mod:`gateway.service`,
``_on_result``): the text the user sees (:func:`reply_text`; none for a stopped turn), sent
once per turn even if a result is reported twice (a report while the turn's reply is
being delivered is dropped; a later one — its update replayed after a store outage —
sends only what was not sent: :mod:`gateway.outbound.delivery` remembers the chunks), into the
streamed answer's message (edit mode) or a recent progress message when there is one
(:class:`~gateway.turns.progress.ProgressConfig`, docs/architecture.md §13). The outbox keeps
its chunks once across restarts (:mod:`gateway.outbound.delivery`).
"""

from __future__ import annotations

import logging

from adapters.base import SentMessage
from core.agent.turn import TurnResult
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import ChatDirectory
from gateway.turns.progress import ProgressConfig, ProgressView
from gateway.turns.streaming import StreamedReply

logger = logging.getLogger(__name__)

FAILED_REPLY = "⚠️ Something went wrong while handling this message. Please try again."


class Replies:
    """Sends the replies of one service's turns through its chats' outbounds."""

    def __init__(
        self, directory: ChatDirectory, delivery: Delivery, progress: ProgressConfig
    ) -> None:
        self._directory, self._delivery, self._progress = directory, delivery, progress
        self._delivering: set[str] = set()

    async def deliver(
        self, key: str, result: TurnResult, view: ProgressView | None, stream: StreamedReply | None
    ) -> None:
        """Send the reply once (the outbox keeps its chunks once across restarts); the
        streamed answer's message (edit mode), else a recent progress message, becomes its
        first chunk — never the progress message after a native stream, whose place the
        adapter gives the reply (see :class:`ProgressConfig`, docs/architecture.md §13)."""
        turn_id = result.turn_id
        if turn_id in self._delivering:
            logger.error("turn %s is being answered; duplicate dropped", turn_id)
            return
        if turn_id:
            self._delivering.add(turn_id)
        try:
            await self._deliver(key, result, view, stream)
        finally:
            self._delivering.discard(turn_id)

    async def _deliver(
        self, key: str, result: TurnResult, view: ProgressView | None, stream: StreamedReply | None
    ) -> None:
        place = self._directory.place(key)
        text = reply_text(result)
        if place is None or text is None:
            return
        into = await stream.hand_over() if stream is not None else None
        if stream is None or stream.mode == "edit":  # a native stream's place is the reply's
            into = into or await self._progress_into_reply(view)
        await self._delivery.reply(
            place.outbound, place.chat, text, turn_id=result.turn_id or None, into=into
        )

    async def _progress_into_reply(self, view: ProgressView | None) -> SentMessage | None:
        """The progress message to edit into the reply: only a recent one (an edit notifies
        nobody, so a long turn ends with a new message and its progress is removed)."""
        config = self._progress
        if view is None or not config.becomes_reply or view.age() > config.new_message_after:
            return None
        return await view.hand_over()


def reply_text(result: TurnResult) -> str | None:
    """What the user sees for a finished turn; None for a stopped one (/stop answered)."""
    if result.status == "interrupted":
        return None
    if result.reply and result.reply.strip():
        return result.reply
    if result.status == "failed":
        return FAILED_REPLY
    return None
