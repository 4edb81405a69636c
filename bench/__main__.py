"""``python -m bench [name ...] [--quick]``: run benchmarks and print their tables."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from bench import (
    attachments,
    budgets,
    cluster,
    dispatch,
    edges,
    files,
    kill_streams,
    mcp,
    memory,
    message_path,
    model_client,
    outage,
    press,
    quota,
    render,
    sandbox,
    schedule,
    stop,
    store,
    streaming,
    transport,
    turn,
)
from bench.sizes import FULL, QUICK, Sizes

Benchmark = Callable[[Sizes], Awaitable[None]]

BENCHMARKS: dict[str, Benchmark] = {
    "client": model_client.run,
    "turn": turn.run,
    "dispatch": dispatch.run,
    "stop": stop.run,
    "store": store.run,
    "render": render.run,
    "sandbox": sandbox.run,
    "files": files.run,
    "transport": transport.run,
    "path": message_path.run,
    "budgets": budgets.run,
    "press": press.run,
    "attachments": attachments.run,
    "streaming": streaming.run,
    "cluster": cluster.run,
    "mcp": mcp.run,
    "kill_streams": kill_streams.run,
    "outage": outage.run,
    "schedule": schedule.run,
    "edges": edges.run,
    "quota": quota.run,
    "memory": memory.run,
}


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="name", help=f"any of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    return parser.parse_args(argv)


async def _run(names: Sequence[str], sizes: Sizes) -> None:
    for name in names:
        started = time.perf_counter()
        await BENCHMARKS[name](sizes)
        print(f"   ({name}: {time.perf_counter() - started:.1f} s)")


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["e2e"]:  # its own options: python -m bench e2e --help
        from bench import e2e

        return e2e.main(argv[1:])
    options = _arguments(argv)
    unknown = [name for name in options.names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(_run(options.names or list(BENCHMARKS), QUICK if options.quick else FULL))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
