"""Per-turn control surface, shared by the Dispatcher and the running loop.

The Dispatcher creates one ``TurnControl`` per turn and keeps it while the turn runs;
``stop``/``steer``/``redirect`` act on it at once, from any task. The loop drains the
pending steer and redirect before each model call (seed 001 §3.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.cancellation import CancellationToken


@dataclass(slots=True)
class TurnControl:
    token: CancellationToken = field(default_factory=CancellationToken)
    turn_id: str | None = None
    """Set by the loop once the turn is stored, so ``/status`` can name it."""
    _steer: list[str] = field(default_factory=list)
    _redirect: list[str] = field(default_factory=list)

    def stop(self, reason: str = "cancelled") -> None:
        self.token.cancel(reason)

    def steer(self, text: str) -> None:
        """Queue a line to be appended to the most recent tool result."""
        self._steer.append(text)

    def redirect(self, text: str) -> None:
        """Queue a correction that is also folded into the stored user message."""
        self._redirect.append(text)

    def drain_steer(self) -> str | None:
        if not self._steer:
            return None
        text = "\n".join(self._steer)
        self._steer.clear()
        return text

    def restore_steer(self, text: str) -> None:
        """Put an undelivered steer back (no tool message to ride on yet)."""
        self._steer.insert(0, text)

    def drain_redirect(self) -> str | None:
        if not self._redirect:
            return None
        text = "\n".join(self._redirect)
        self._redirect.clear()
        return text

    @property
    def has_pending_steer(self) -> bool:
        return bool(self._steer)
