"""``python prepared.py <module>...``: a ``commonos run`` process whose imports are done
before the test says go (tests/cluster/harness.py ``Cluster.prepare``, docs/cluster.md §11).

It imports the given modules (the run command's and its platforms' adapters: the seconds a
cold ``python -m gateway run`` spends before its first log line), then waits for one line
on stdin. Given it, stdin becomes ``/dev/null`` and the process runs ``python -m gateway
run --config <that line>`` in itself: the same entry point, the same pid, its log on
stderr. It writes nothing and opens no connection before: a second process of a test
imports while the first one starts and takes the bot, and joins only when told.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys


def main(modules: list[str]) -> None:
    sys.path[0] = os.getcwd()  # as ``python -m`` puts it, not this file's directory
    for module in modules:
        importlib.import_module(module)
    config = sys.stdin.readline().strip()
    if not config:  # stdin closed without a go: the test ended first
        raise SystemExit(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.argv = [sys.argv[0], "run", "--config", config]
    runpy.run_module("gateway", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
