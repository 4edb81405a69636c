"""Who and where a turn runs: the identifiers every hook and record of the turn carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TurnScope:
    session_key: str
    session_id: str
    turn_id: str
    requested_by: str | None = None

    def hook_args(self) -> dict[str, str]:
        """The common hook arguments (see :mod:`core.hooks.spec`)."""
        return {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
        }
