"""Per-turn control surface, shared by the Dispatcher and the running loop.

The Dispatcher creates one ``TurnControl`` per turn and keeps it while the turn runs;
``stop``/``steer``/``redirect`` act on it at once, from any task. The loop drains the
pending steer and redirect before each model call (``docs/turn-loop.md`` §10).

A redirect is seen twice: the turn's recorder persists it into the stored user message the
moment it arrives (:meth:`drain_unrecorded`, told by :meth:`redirect` through
:attr:`recorder`), and the
loop hands it to the model before the next model call (:meth:`drain_redirect`). Whatever
the loop did not deliver when the turn ends is taken by :meth:`drain_leftovers` (the
Dispatcher runs it as the next turn) — a steer or redirect is never silently lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from core.cancellation import CancellationToken


@dataclass(slots=True)
class TurnControl:
    token: CancellationToken = field(default_factory=CancellationToken)
    turn_id: str | None = None
    """Set by the loop once the turn is stored, so ``/status`` can name it."""
    redirect_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by :meth:`redirect`; the turn's recorder waits on it to persist at once."""
    redirect_recorded: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once every redirect so far is stored with the user message (cleared by a new one)."""
    steers: list[str] = field(default_factory=list)
    """Steer lines queued by :meth:`steer`, not yet delivered (read it; queue with
    :meth:`steer`): empty, the loop's steer check and the leftovers cost no call."""
    redirects: list[str] = field(default_factory=list)
    """Corrections queued by :meth:`redirect`, not yet handed to the model (read only)."""
    unrecorded: list[str] = field(default_factory=list)
    """Corrections not yet stored with the user message (read only)."""
    recorder: Callable[[], None] | None = None
    """The running loop's redirect recorder (:class:`core.agent.steer.RedirectRecorder`),
    told at once by :meth:`redirect`; None while no loop runs (the turn records what is
    left when it opens, before each model call and after its loop)."""

    def stop(self, reason: str = "cancelled") -> None:
        self.token.cancel(reason)

    def steer(self, text: str) -> None:
        """Queue a line to be appended to the most recent tool result."""
        self.steers.append(text)

    def redirect(self, text: str) -> None:
        """Queue a correction that is also folded into the stored user message."""
        self.redirects.append(text)
        self.unrecorded.append(text)
        self.redirect_recorded.clear()
        self.redirect_arrived.set()
        if self.recorder is not None:
            self.recorder()

    def drain_steer(self) -> str | None:
        if not self.steers:
            return None
        text = "\n".join(self.steers)
        self.steers.clear()
        return text

    def restore_steer(self, text: str) -> None:
        """Put an undelivered steer back (no tool message to ride on yet)."""
        self.steers.insert(0, text)

    def drain_redirect(self) -> str | None:
        if not self.redirects:
            return None
        text = "\n".join(self.redirects)
        self.redirects.clear()
        return text

    def drain_unrecorded(self) -> list[str]:
        """Redirects not yet persisted into the stored user message (oldest first)."""
        self.redirect_arrived.clear()
        found = list(self.unrecorded)
        self.unrecorded.clear()
        return found

    def drain_leftovers(self) -> str | None:
        """Redirect and steer text the turn never delivered to the model, or None."""
        parts = [text for text in (self.drain_redirect(), self.drain_steer()) if text]
        return "\n".join(parts) if parts else None

    @property
    def has_pending_steer(self) -> bool:
        return bool(self.steers)
