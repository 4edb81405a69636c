"""Scheduled turns in the gateway (issue 31): the chat commands (:mod:`.commands`); the
store and the scheduler are :mod:`core.store.jobs` and :mod:`core.schedule`. Imported only
when ``[schedule] enabled``."""

MENU: tuple[tuple[str, str], ...] = (
    ("every", "Run a prompt at an interval: /every 1h <prompt>"),
    ("at", "Run a prompt once: /at 09:00 <prompt>"),
    ("cron", 'Run a prompt on a cron schedule: /cron "0 9 * * 1" <prompt>'),
    ("jobs", "Your scheduled jobs; pause, resume, delete or run one"),
    ("tz", "Your time zone for /at and /cron"),
)
"""The commands' entries in the platforms' menus (Slack and Discord know only these)."""
