"""The terminal chat as a platform: a section saying who is at the keyboard.

Not among the built-in platforms read from ``config.toml``: ``commonos chat`` registers it
(:func:`adapters.platforms.register`) with the adapter it drives, and runs the gateway
with this section as its only platform. The local user is allowed and approves their own
requests (the requester may always approve).
"""

from __future__ import annotations

from adapters.base import Adapter
from adapters.config import PlatformSection
from adapters.platforms import AdapterContext, Platform
from adapters.terminal.adapter import PLATFORM as NAME
from adapters.terminal.adapter import TerminalAdapter, TerminalSettings


class TerminalSection(PlatformSection):
    user: str = "local"
    """Who is at the keyboard (``terminal:<user>``; the session ``terminal:dm:<user>``)."""

    def implicit_users(self) -> frozenset[str]:
        return frozenset({self.user})


def platform_for(adapter: TerminalAdapter) -> Platform:
    """The terminal platform whose factory hands the gateway ``adapter`` (the one the
    caller reads Ctrl-C and "quit" from)."""

    def build(section: TerminalSection, context: AdapterContext) -> Adapter:
        return adapter

    return Platform(NAME, TerminalSection, build)


def section_for(settings: TerminalSettings) -> TerminalSection:
    return TerminalSection(user=settings.user)
