"""How much work each benchmark does: modest by default, smaller with ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sizes:
    client_calls: int = 300
    turns: int = 200
    turns_per_session: int = 10
    dispatch_keys: int = 1000
    dispatch_messages: int = 3
    stops: int = 50
    appends: int = 10_000
    history: int = 5_000
    loads: int = 20
    renders: int = 1000
    sandbox_runs: int = 100
    file_calls: int = 1000
    intake_runs: int = 5
    """Fresh processes, each taking in one 20 MB file (``attachments``)."""
    stream_answers: int = 10
    """Streamed answers per platform row, after one warm-up (``streaming``)."""

    @property
    def traced(self) -> int:
        """Iterations of the traced (and warm-up) pass of a sampled case."""
        return max(5, self.turns // 10)


FULL = Sizes()
QUICK = Sizes(
    client_calls=50,
    turns=40,
    dispatch_keys=100,
    stops=10,
    appends=1000,
    history=500,
    loads=5,
    renders=100,
    sandbox_runs=20,
    file_calls=200,
    intake_runs=2,
    stream_answers=3,
)
