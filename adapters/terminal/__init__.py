"""The terminal chat: ``commonos chat`` talks to the agent from a terminal (e.g. over SSH)."""

from adapters.terminal.adapter import (
    PLATFORM,
    TerminalAdapter,
    TerminalSettings,
    local_user,
)

__all__ = ["PLATFORM", "TerminalAdapter", "TerminalSettings", "local_user"]
