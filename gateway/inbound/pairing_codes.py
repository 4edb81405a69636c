"""Pairing codes and their limits (docs/pairing.md): how a code is made, written, hashed
and recognised, the limits of pairing (:class:`PairingSettings`), and the count of wrong
codes per user who typed them (:class:`WrongCodes`). The flow that uses them is
:mod:`gateway.inbound.pairing`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from core.bounded import BoundedMap

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""32 symbols, none easily misread (no 0/O, 1/I): 8 of them are 40 random bits."""
CODE_LENGTH = 8
DEFAULT_TTL = 3600.0
"""Seconds a code stays valid unless the section's ``pairing_ttl`` says otherwise."""
KEEP_EXPIRED = 86_400.0
"""Expired codes are kept a day (an owner typing one is told it expired), then dropped."""
WRONG_USERS_CAPACITY = 10_000

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class PairingSettings:
    """The limits of pairing, the same on every platform (docs/pairing.md); the code's
    lifetime is per platform (``pairing_ttl``)."""

    refresh_seconds: float = 600.0
    """A user gets a new code at most once in this time; a re-ask gets the same code."""
    max_pending: int = 10
    """Live codes per platform; past it a stranger gets no code."""
    wrong_limit: int = 5
    """Wrong codes one user may type in ``wrong_window`` seconds."""
    wrong_window: float = 900.0
    sync_seconds: float = 5.0
    """How often the gateway reads the store for approvals and revocations made by
    ``commonos pair`` (another process)."""


# codes -------------------------------------------------------------------------------
def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalized(text: str) -> str:
    """What the user typed, as a code: upper case, no spaces or dashes."""
    return "".join(text.split()).replace("-", "").upper()


def hash_code(code: str) -> str:
    return hashlib.sha256(normalized(code).encode()).hexdigest()


def shown(code: str) -> str:
    """``ABCD-EFGH``: easier to read out and copy."""
    return f"{code[:4]}-{code[4:]}"


def is_code_shaped(text: str) -> bool:
    code = normalized(text)
    return len(code) == CODE_LENGTH and all(char in ALPHABET for char in code)


# wrong codes -------------------------------------------------------------------------
class WrongCodes:
    """Wrong codes per user who typed them, in a sliding window: past the limit that user
    waits (never the platform, never anyone else)."""

    def __init__(self, settings: PairingSettings, clock: Clock) -> None:
        self._limit, self._window, self._clock = settings.wrong_limit, settings.wrong_window, clock
        self._seen: BoundedMap[str, list[float]] = BoundedMap(WRONG_USERS_CAPACITY)

    def wait(self, user: str) -> float:
        """Seconds ``user`` must wait before trying a code again (0: may try now)."""
        recent = self._recent(user)
        if len(recent) < self._limit:
            return 0.0
        return recent[-self._limit] + self._window - self._clock()

    def add(self, user: str) -> None:
        self._seen.put(user, [*self._recent(user), self._clock()])

    def _recent(self, user: str) -> list[float]:
        since = self._clock() - self._window
        return [at for at in self._seen.get(user, []) if at > since]
