"""Benchmarks: speed and memory figures for the engine, printed as small tables.

Run from the repository root: ``python -m bench`` (all), ``python -m bench turn`` (one),
``--quick`` for smaller sizes. Everything runs on 127.0.0.1 against the scripted model
server, which lives in a child process (:mod:`bench.model_host`) so the figures measure our
side only: its CPU is not on our event loop and its allocations are not in our tracemalloc
peak. Stores live in temporary directories that are removed afterwards.

Latencies come from an untraced pass; the "traced peak" column is tracemalloc's peak over a
separate traced pass of the same work (tracing slows Python down, so it never shares a
pass with the clock). "RSS peak" is the process high-water mark so far
(``resource.getrusage``), so it only grows from one table to the next.
"""
