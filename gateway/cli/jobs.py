"""``commonos jobs list | pause ID | delete ID`` (README "Scheduled turns").

Each opens the configured store directly, like ``commonos pair``: it can run while the
gateway runs (SQLite in WAL mode; PostgreSQL is shared); the scheduler reads the jobs at
each tick, so a paused or deleted job does not run again. Works whether or not
``[schedule]`` is enabled.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.store.jobs import JobBook
    from gateway.config import Config


class JobsProblem(Exception):
    """One line for the operator; the command exits 1."""


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    config_option: Callable[[argparse.ArgumentParser], None],
) -> None:
    """The ``jobs`` command and its actions on ``commonos``'s parser."""
    jobs = commands.add_parser("jobs", help="scheduled jobs (README 'Scheduled turns')")
    actions = jobs.add_subparsers(dest="jobs_action", metavar="ACTION", required=True)
    listed = actions.add_parser("list", help="every job: next run, last outcome, state")
    config_option(listed)
    listed.set_defaults(handler=command, job_id="")
    for action, text in (("pause", "pause a job (resume it from the chat)"),
                         ("delete", "delete a job and its runs")):  # fmt: skip
        parser = actions.add_parser(action, help=text)
        parser.add_argument("job_id", metavar="ID", help="the job's id (first column of list)")
        config_option(parser)
        parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from core.store.base import StoreError
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        print(asyncio.run(act(config, args.jobs_action, args.job_id)))
    except ConfigError as exc:
        return _fail(exc.errors)
    except (StoreError, JobsProblem) as exc:
        return _fail([str(exc)])
    return 0


async def act(config: Config, action: str, job_id: str) -> str:
    """What ``commonos jobs <action>`` prints."""
    from core.store.jobs import job_book
    from gateway.stores import configured_store

    async with configured_store(config) as store:
        book = job_book(store)
        if action == "list":
            return await listing(book)
        if await book.job(job_id) is None:
            raise JobsProblem(f"no job {job_id} (see `commonos jobs list`)")
        if action == "pause":
            await book.set_state(job_id, "paused", "paused by the operator")
            return f"paused job {job_id}"
        await book.delete(job_id)
        return f"deleted job {job_id}"


async def listing(book: JobBook) -> str:
    """One line per job: id, creator, state, next run, last outcome, what and when."""
    from gateway.control.schedule import describe, next_run, outcome

    jobs = await book.jobs()
    if not jobs:
        return "no jobs"
    lines = []
    for job in jobs:
        runs = await book.runs_of(job.id, limit=1)
        last = outcome(runs[0]) if runs else "never ran"
        state = job.state_reason or job.state
        lines.append(
            f"{job.id}  {job.person}  {state}  next {next_run(job)}  last {last}  {describe(job)}"
        )
    return "\n".join(lines)


def _fail(lines: list[str]) -> int:
    for line in lines:
        print(f"commonos: {line}", file=sys.stderr)
    return 1
