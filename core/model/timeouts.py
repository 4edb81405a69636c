"""How long the model client waits, as three bounds instead of one total.

(``docs/turn-loop.md`` §4, "Timeouts".)

- ``connect``: opening the connection (TCP, TLS, a proxy).
- ``first_byte``: from the request sent to the first byte of the answer. A streaming
  server answers with headers, then keep-alive pings or the first token; a non-streaming
  one sends nothing until the whole answer is ready, so there this bounds the generation.
- ``idle``: once the reply flows, the longest gap between two chunks. Any bytes count,
  llama.cpp's ``:`` SSE pings (every 30 s while it reads a long prompt) too.

A stream that keeps producing is never cut, however long it runs; one that falls silent
is, and the retry policy decides whether to try again. ``None`` means no bound.

The single ``timeout`` of older configurations is kept as a deprecated alias: it stands
in for each bound not given explicitly (:meth:`Timeouts.given`), which is what it
meant before (it bounded connecting and each wait for bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

CONNECT_SECONDS = 10.0
FIRST_BYTE_SECONDS = 120.0
IDLE_SECONDS = 60.0
"""Above llama.cpp's 30 s keep-alive ping, so a long prompt is never cut mid-read."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float | None = CONNECT_SECONDS
    first_byte: float | None = FIRST_BYTE_SECONDS
    idle: float | None = IDLE_SECONDS

    def __post_init__(self) -> None:
        for name in ("connect", "first_byte", "idle"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"model {name} timeout must be positive, got {value}")

    @classmethod
    def given(
        cls,
        *,
        connect: float | None = None,
        first_byte: float | None = None,
        idle: float | None = None,
        legacy: float | None = None,
    ) -> Timeouts:
        """The bounds given; each one left out is ``legacy`` when set, else its default."""
        fallback = cls() if legacy is None else cls(legacy, legacy, legacy)
        return cls(
            fallback.connect if connect is None else connect,
            fallback.first_byte if first_byte is None else first_byte,
            fallback.idle if idle is None else idle,
        )

    def for_httpx(self) -> httpx.Timeout:
        """httpx's per-request view: ``read`` is the first-byte wait (the transport
        switches to ``idle`` once the body flows, :mod:`core.model.http_transport`)."""
        return httpx.Timeout(
            connect=self.connect, read=self.first_byte, write=self.first_byte, pool=self.connect
        )
