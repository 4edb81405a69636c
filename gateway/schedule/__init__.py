"""Scheduled turns in the gateway (issue 31): the chat commands (:mod:`.commands`); the
store and the scheduler are :mod:`core.store.jobs` and :mod:`core.schedule`. Imported only
when ``[schedule] enabled``."""
