"""``commonos usage [--since DATE]`` (README "Usage and quotas"), registered in
:mod:`gateway.cli.main`.

What the model calls spent since ``DATE`` (``YYYY-MM-DD``, midnight in ``[quotas]
timezone``; default: the first of this month): everyone's totals, then the top people,
chats, profiles and models by tokens. Opens the configured store directly, like ``commonos
jobs``, so it runs while the gateway runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from core.store.usage import UsageBook
    from gateway.config import Config

TOP = 10
GROUPS = (("person", "Top people:"), ("chat", "Top chats:"), ("profile", "By profile:"),
          ("model", "By model:"))  # fmt: skip


class UsageProblem(Exception):
    """One line for the operator; the command exits 1."""


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    config_option: Callable[[argparse.ArgumentParser], None],
) -> None:
    """The ``usage`` command on ``commonos``'s parser."""
    usage = commands.add_parser("usage", help="model tokens and cost: totals, top people and chats")
    usage.add_argument(
        "--since", metavar="DATE", help="from this day (YYYY-MM-DD; default: this month's first)"
    )
    config_option(usage)
    usage.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from core.store.base import StoreError
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        zone = config.quotas.zone()
        since = since_of(args.since, zone, time.time())
        print(asyncio.run(report(config, since)))
    except ConfigError as exc:
        return _fail(exc.errors)
    except (StoreError, UsageProblem) as exc:
        return _fail([str(exc)])
    return 0


def since_of(text: str | None, zone: ZoneInfo, now: float) -> float:
    """Midnight of ``text`` (``YYYY-MM-DD``) in ``zone``; None: the first of ``now``'s month."""
    if text is None:
        day = datetime.fromtimestamp(now, zone).date().replace(day=1)
    else:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise UsageProblem(
                f"--since {text!r} is not a date (expected YYYY-MM-DD, e.g. 2027-01-01)"
            ) from None
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


async def report(config: Config, since: float) -> str:
    """What ``commonos usage`` prints."""
    from core.store.jobs import StatementRunner
    from core.store.usage import UsageBook
    from gateway.stores import configured_store, store_display, store_exists

    if not store_exists(config):
        raise UsageProblem(f"no store at {store_display(config)} yet (nothing recorded)")
    async with configured_store(config) as store:
        if not isinstance(store, StatementRunner):
            raise UsageProblem("this store keeps no model usage")
        return await lines_of(UsageBook(store), since, config.quotas.zone())


async def lines_of(book: UsageBook, since: float, zone: ZoneInfo) -> str:
    from gateway.control.usage.report import figures, ranking

    start = datetime.fromtimestamp(since, zone)
    lines = [f"Model usage since {start:%Y-%m-%d %H:%M} {start.tzname()}"]
    lines.append(f"Everyone: {figures(await book.totals(since))}")
    for by, title in GROUPS:
        rows = await book.top(by, since, TOP)
        if rows:
            lines += ["", *ranking(title, rows)]
    return "\n".join(lines)


def _fail(lines: list[str]) -> int:
    for line in lines:
        print(f"commonos: {line}", file=sys.stderr)
    return 1
