"""Measuring and printing: latency samples, traced peaks, RSS and the aligned tables."""

from __future__ import annotations

import math
import resource
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

MIB = 1024 * 1024

Operation = Callable[[int], Awaitable[object]]
"""One benchmarked operation; gets its iteration number."""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a table: a case, its latencies (ms), throughput and memory."""

    what: str
    n: int
    latencies_ms: Sequence[float]
    seconds: float
    traced_peak_mib: float | None = None
    unit: str = "op"

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (no interpolation): a value that was actually measured."""
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def rss_peak_mib() -> float:
    """The process's peak resident set size so far (``ru_maxrss``: KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 1024


async def timed(op: Operation, n: int) -> tuple[list[float], float]:
    """Run ``op`` ``n`` times in sequence: each latency in ms, and the total seconds."""
    latencies: list[float] = []
    start = time.perf_counter()
    for index in range(n):
        began = time.perf_counter()
        await op(index)
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies, time.perf_counter() - start


async def traced_peak(work: Callable[[], Awaitable[object]]) -> float:
    """tracemalloc's peak (MiB) above the level when ``work`` started."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - base) / MIB


async def sample(
    what: str, op: Operation, n: int, *, traced: int, offset: int = 0, unit: str = "op"
) -> Row:
    """``traced`` iterations under tracemalloc (also the warm-up), then ``n`` timed ones.

    The operation gets iteration numbers ``offset + i``; the timed pass continues after the
    traced one, so an operation that needs fresh names per call gets them.
    """
    peak = await traced_peak(lambda: timed(lambda i: op(offset + i), traced))
    latencies, seconds = await timed(lambda i: op(offset + traced + i), n)
    return Row(what, n, latencies, seconds, peak, unit)


def print_table(title: str, rows: Sequence[Row], notes: Sequence[str] = ()) -> None:
    header = ("case", "n", "p50 ms", "p95 ms", "max ms", "rate", "traced peak MiB")
    print_grid(title, header, [_cells(row) for row in rows], notes)


def print_grid(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
) -> None:
    """A table of cells: the first column left-aligned, the rest right-aligned, then notes."""
    lines = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(line[col]) for line in lines) for col in range(len(header))]
    print(f"\n== {title}  (RSS peak {rss_peak_mib():.1f} MiB)")
    for line in lines:
        first = line[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True))
        print("  ".join((first, *rest)))
    for note in notes:
        print(f"   {note}")
    sys.stdout.flush()


def _cells(row: Row) -> tuple[str, ...]:
    lat = row.latencies_ms
    peak = "-" if row.traced_peak_mib is None else f"{row.traced_peak_mib:.2f}"
    if not lat:
        return (row.what, str(row.n), "-", "-", "-", f"{row.rate:.0f} {row.unit}/s", peak)
    spread = (f"{percentile(lat, 0.5):.2f}", f"{percentile(lat, 0.95):.2f}", f"{max(lat):.2f}")
    return (row.what, str(row.n), *spread, f"{row.rate:.0f} {row.unit}/s", peak)
