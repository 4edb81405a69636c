"""Who and where a turn runs: the identifiers every hook and record of the turn carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TurnScope:
    session_key: str
    session_id: str
    turn_id: str
    requested_by: str | None = None

    @property
    def common(self) -> dict[str, str]:
        """The common hook arguments (see :mod:`core.hooks.spec`), a fresh dict each time:
        made only where a hook fires (``**scope.common``), so a turn with no hooks never
        makes it (``docs/turn-loop.md`` §7)."""
        return {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
        }
