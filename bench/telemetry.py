"""``python -m bench.telemetry``: what a span costs, off and on (issue 23 point 5).

Off (no tracer installed, the default): ``with tracing.span(name, **attributes)`` hands
back the shared no-op, so a turn's handful of spans cost nothing measurable. On: the same
span through the OpenTelemetry SDK (:mod:`gateway.otel`), ended into a batch processor
whose exporter drops what it gets — the in-process price of telemetry without the network.
Figures are nanoseconds per span, the empty loop's time taken off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from core import tracing

ROUNDS = 200_000


def per_call_ns(body: Callable[[], None], rounds: int = ROUNDS) -> float:
    """Nanoseconds per ``body()``, best of three, the empty loop's time taken off."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter_ns()
        for _ in range(rounds):
            body()
        best = min(best, time.perf_counter_ns() - started)
    return max(0.0, (best - _empty(rounds)) / rounds)


def _empty(rounds: int) -> float:
    def nothing() -> None:
        return None

    started = time.perf_counter_ns()
    for _ in range(rounds):
        nothing()
    return time.perf_counter_ns() - started


def one_span() -> None:
    with tracing.span("tool.call", **{"tool.name": "read_file"}) as span:
        span.set("tool.status", "finished")


def off_ns() -> float:
    tracing.install(None)
    return per_call_ns(one_span)


def on_ns() -> float:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from gateway.otel import OtelTracer

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    tracing.install(OtelTracer(provider))
    try:
        return per_call_ns(one_span, ROUNDS // 10)
    finally:
        tracing.install(None)
        provider.shutdown()


def main() -> None:
    print("span (one attribute at start, one set)    ns/span")
    print(f"  off: no tracer (the default)          {off_ns():8.0f}")
    print(f"  on:  OpenTelemetry SDK, batch, no I/O {on_ns():8.0f}")


if __name__ == "__main__":
    main()
