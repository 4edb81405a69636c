"""``[schedule]``: scheduled turns — reminders and recurring jobs (README "Scheduled turns",
issue 31).

Off unless ``enabled = true`` (a production gateway runs no turn nobody asked for until
its operator opts in); then ``/every``, ``/at``, ``/cron``, ``/tz`` and ``/jobs`` answer in
chats and the scheduler claims due occurrences in the store.
"""

from __future__ import annotations

from typing import Literal

from adapters.config import Flag, PositiveInt, Section, Texts


class ScheduleSection(Section):
    enabled: Flag = False
    """Scheduled turns on: the chat commands and the scheduler."""
    timezone: str = "UTC"
    """The time zone of ``/at`` and ``/cron`` for a person who set none with ``/tz``."""
    min_interval_seconds: PositiveInt = 60
    """The shortest ``/every`` interval (and the closest cron occurrences)."""
    max_jobs_per_person: PositiveInt = 50
    """Jobs one person may have that have not ended."""
    missed: Literal["run_once", "skip"] = "run_once"
    """Occurrences that fell while no gateway ran: one catch-up run per job with a note
    (``run_once``), or recorded as missed (``skip``). Never a burst."""
    session: Literal["isolated", "chat"] = "isolated"
    """Where a run happens: a fresh session per run, or the chat's own (queued behind it)."""
    pause_after_failed_deliveries: PositiveInt = 3
    """Undeliverable answers in a row (bot removed, chat gone) before the job is paused."""
    ask_in_profiles: Texts = ()
    """Profiles whose agent asks the person (an approval card) before its ``schedule`` tool
    makes a job. Default: none (the tool makes it at once)."""
