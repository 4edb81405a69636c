"""What every ``commonos`` command shares on the console: one ``commonos: <problem>`` line
per cause on stderr (:func:`fail`, exit code 1) and the log format (:func:`configure_logging`).
The commands (:mod:`gateway.cli.main`, :mod:`gateway.cli.chat`) import it; it imports none
of them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from core.tracing import TraceIds

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s%(trace)s"
"""``trace``: `` trace=<32 hex>`` for a record made inside a span, else "" (core.tracing)."""
CHATTY_LIBRARIES = ("httpx", "httpcore", "aiosqlite", "telegram", "discord", "slack_bolt")


def fail(lines: Sequence[str]) -> int:
    """Each line as ``commonos: <line>`` on stderr; the exit code of a problem the user can
    fix (1)."""
    for line in lines:
        print(f"commonos: {line}", file=sys.stderr)
    return 1


def configure_logging(level: str) -> None:
    """Log from ``level`` up to stderr in :data:`LOG_FORMAT`; the chatty libraries only from
    ``WARNING`` unless ``DEBUG``."""
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(TraceIds())
    if level != "DEBUG":
        for name in CHATTY_LIBRARIES:
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
