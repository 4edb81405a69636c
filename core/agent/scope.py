"""Who and where a turn runs: the identifiers every hook and record of the turn carries."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TurnScope:
    session_key: str
    session_id: str
    turn_id: str
    requested_by: str | None = None
    common: dict[str, str] = field(init=False, repr=False, compare=False)
    """The common hook arguments (see :mod:`core.hooks.spec`), made once per turn; every
    dispatch of the turn spreads it (``**scope.common``) and none changes it."""

    def __post_init__(self) -> None:
        common = {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
        }
        object.__setattr__(self, "common", common)

    def hook_args(self) -> dict[str, str]:
        """The common hook arguments, a copy (see :attr:`common`)."""
        return dict(self.common)
