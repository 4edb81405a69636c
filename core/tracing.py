"""The tracing port: spans of a turn, without OpenTelemetry in core (issue 23 point 5).

Core code marks what it does with :func:`span` (a child of the current span, if any) and
:func:`trace` (a new trace: a turn is the root of its own)::

    with tracing.span("model.call", **{"model.name": name, "iteration": 1}) as current:
        reply = await ...
        current.set("finish_reason", reply.finish_reason)

Both are plain and ``async with`` context managers. Until the gateway installs a
:class:`Tracer` (``gateway.telemetry``, only when ``[telemetry] otlp_endpoint`` is set)
they hand back one shared no-op object: no import, no allocation but the keyword dict.
A site on a message's path (a turn, its model calls) reads :data:`tracer` first and, while
it is None, makes no span at all: telemetry that is off costs the turn no call. The span
that is current travels in context variables, so tasks started inside a span (a turn's
progress edits, typing) make their spans in the same trace.

What an attribute may hold: names, counts, kinds, outcomes, hashes. Never the text of a
message, a reply, a prompt, tool arguments or results, or a file name: everything passed
here is exported to a collector the operator may not trust with chat contents.

:class:`TraceIds` is the logging filter that gives every record ``trace_id`` (32 hex digits
inside a span, "" outside) and ``trace`` (`` trace=<id>`` or ""), which the gateway's log
format prints after the message.
"""

from __future__ import annotations

import hashlib
import logging
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Protocol

from core.text import valid_text

AttributeValue = str | bool | int | float
"""What an attribute may be (OTel's scalar types); None values are left out."""


class Span(Protocol):
    """The span a ``with`` gives: attributes learned while it runs."""

    def set(self, key: str, value: AttributeValue | None) -> None: ...


class Tracer(Protocol):
    """What the gateway installs (:mod:`gateway.telemetry`)."""

    def start(
        self, name: str, attributes: dict[str, AttributeValue], *, root: bool
    ) -> AbstractContextManager[Span]:
        """A span named ``name``, current while the context is entered; ``root``: the
        first of a new trace. An exception leaving it marks it failed, by the exception's
        type name only (never its text)."""
        ...

    def current_trace_id(self) -> str | None:
        """The 32 hex digits of the current span's trace, None outside any span."""
        ...

    def carrier(self) -> dict[str, str]:
        """The current span as W3C trace-context fields (``traceparent``), to cross a
        process; empty outside any span."""
        ...

    def joined(self, carrier: dict[str, str]) -> AbstractContextManager[None]:
        """Spans started inside are children of the span ``carrier`` came from."""
        ...


class NoSpan:
    """The span when no tracer is installed: every method does nothing."""

    __slots__ = ()

    def set(self, key: str, value: AttributeValue | None) -> None:
        return None

    def __enter__(self) -> NoSpan:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    async def __aenter__(self) -> NoSpan:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


NO_SPAN = NoSpan()


class LiveSpan:
    """A span of the installed tracer, usable with ``with`` and ``async with``."""

    __slots__ = ("_manager",)

    def __init__(self, manager: AbstractContextManager[Span]) -> None:
        self._manager = manager

    def __enter__(self) -> Span:
        return self._manager.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._manager.__exit__(kind, error, tb)

    async def __aenter__(self) -> Span:
        return self._manager.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._manager.__exit__(kind, error, tb)


SpanScope = NoSpan | LiveSpan
"""What :func:`span` and :func:`trace` return: enter it (``with`` or ``async with``) to get
the :class:`Span`."""

tracer: Tracer | None = None
"""The installed tracer; None while telemetry is off (read it as ``tracing.tracer``: a
site on the message path skips its span while it is None)."""


def install(installed: Tracer | None) -> None:
    """Make ``installed`` the tracer every span goes to (None: back to no-op spans)."""
    global tracer
    tracer = installed


def installed() -> bool:
    return tracer is not None


def span(name: str, **attributes: AttributeValue | None) -> SpanScope:
    """A child of the current span (or a root outside any), named ``name``."""
    if tracer is None:
        return NO_SPAN
    return LiveSpan(tracer.start(name, _present(attributes), root=False))


def trace(name: str, **attributes: AttributeValue | None) -> SpanScope:
    """The root span of a new trace, whatever span is current (a turn)."""
    if tracer is None:
        return NO_SPAN
    return LiveSpan(tracer.start(name, _present(attributes), root=True))


def current_trace_id() -> str | None:
    """The current trace's id (32 hex digits); None outside a span or with no tracer."""
    return None if tracer is None else tracer.current_trace_id()


def carrier() -> dict[str, str]:
    """The current span, to be sent along with work another process does for it (a relayed
    platform call, gateway/cluster/relay.py); empty with no tracer or outside a span."""
    return {} if tracer is None else tracer.carrier()


def joined(carrier: object) -> AbstractContextManager[None]:
    """Continue the trace ``carrier`` (from :func:`carrier`, maybe another process's) for
    the spans started inside; anything else (missing, malformed) continues nothing."""
    if tracer is None or not _is_carrier(carrier):
        return nullcontext()
    assert isinstance(carrier, dict)
    return tracer.joined(carrier)


def _is_carrier(value: object) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    )


def _present(attributes: dict[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    return {key: value for key, value in attributes.items() if value is not None}


def session_hash(session_key: str) -> str:
    """What a span says of a session: 16 hex digits of the key's SHA-256 (a key names a
    chat and a user; the hash still lets one turn's spans be found with another's). A key
    holding a lone surrogate hashes as its repaired form (:func:`core.text.valid_text`),
    the key the store keeps."""
    return hashlib.sha256(valid_text(session_key).encode()).hexdigest()[:16]


class TraceIds(logging.Filter):
    """Sets ``record.trace_id`` (the current trace's id, or "") and ``record.trace``
    (`` trace=<id>``, or "") on every record; it drops none. Sits on a handler, so records
    of every logger pass it."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = current_trace_id()
        record.trace_id = trace_id or ""
        record.trace = f" trace={trace_id}" if trace_id else ""
        return True
