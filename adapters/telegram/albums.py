"""Albums: the messages of one ``media_group_id`` folded into one event (docs/attachments.md).

Telegram delivers an album (several photos or files sent together) as one message per part,
each its own update, sharing a ``media_group_id``; the caption rides on one part (the
first, from the official clients). Each part is stored in the inbox as any update; its
delivery hands the event to :meth:`Albums.add`, which gathers the parts of one chat's
album until none has arrived for :data:`ALBUM_WINDOW` seconds (measured on an injected
sleep), then hands ONE event to the sink: the first part's (so its origin, and what a replay
finds stored, is the lowest update id), with every part's attachments in update order and
the parts' captions joined by newlines. Every part's delivery returns that one event, so
each part's inbox item settles with the folded event's receipt: all done once its turn was
answered, all replayed when a shutdown cut it short — and a replay after a restart folds
the unfinished parts again, the same way.

Left as is: a part arriving more than the window after the previous one (a client that
stalled) makes a second event; a crash between the parts' done marks (written one after
another, microseconds apart) replays the unmarked ones as an album of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from adapters.base import EventSink, InboundEvent, Receipt

ALBUM_WINDOW = 1.0
"""Seconds with no new part after which an album is complete (Telegram's clients upload
the parts back to back; they reach a bot well within a second of each other)."""

Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class _Album:
    parts: list[InboundEvent] = field(default_factory=list)
    folded: asyncio.Future[InboundEvent] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Albums:
    """The albums of one adapter run that are still gathering their parts."""

    def __init__(
        self, sink: EventSink, window: float = ALBUM_WINDOW, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.sink, self.window, self.sleep = sink, window, sleep
        self._open: dict[str, _Album] = {}

    def waiting(self) -> int:
        """Parts gathered and not yet handed over (for tests and diagnostics)."""
        return sum(len(album.parts) for album in self._open.values())

    async def add(self, group: str, event: InboundEvent) -> InboundEvent:
        """Gather ``event`` into album ``group``; returns the folded event once the sink was
        given it (the first part's delivery gives it)."""
        key = f"{event.chat.chat_id}:{group}"
        album = self._open.get(key)
        if album is not None:
            album.parts.append(event)
            return await asyncio.shield(album.folded)
        album = _Album([event])
        self._open[key] = album
        try:
            await self._quiet(album)
        except BaseException:
            self._open.pop(key, None)
            album.folded.cancel()
            raise
        del self._open[key]
        folded = fold(album.parts)
        try:
            await self.sink(folded)
        except BaseException:
            album.folded.cancel()  # the other parts stay unfinished: they replay next run
            raise
        album.folded.set_result(folded)
        return folded

    async def _quiet(self, album: _Album) -> None:
        """Until no part has arrived for a whole window."""
        while True:
            seen = len(album.parts)
            await self.sleep(self.window)
            if len(album.parts) == seen:
                return


def fold(parts: list[InboundEvent]) -> InboundEvent:
    """One event of an album's parts: the first part's, with every part's files and text."""
    ordered = sorted(parts, key=lambda e: int(e.update_id))
    first = ordered[0]
    return replace(
        first,
        text="\n".join(e.text for e in ordered if e.text),
        attachments=tuple(a for e in ordered for a in e.attachments),
        mentioned=any(e.mentioned for e in ordered),
        reply_to_bot=any(e.reply_to_bot for e in ordered),
        receipt=Receipt(),
    )
