"""The loopback platform: its ``[loopback]`` section, its adapter factory and its lease
credential — everything the gateway (and a cluster) needs, given through
:class:`adapters.platforms.Platform`; no module under gateway/ names it."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import Adapter
from adapters.config import GroupChatSection
from adapters.platforms import AdapterContext, Platform
from tests.gateway.fakes import FakeAdapter

NAME = "loopback"


class LoopbackSection(GroupChatSection):
    """``[loopback]``: the bot's token (what a cluster leases it by)."""

    token: str = "loopback-token"


@dataclass(eq=False)
class LoopbackAdapter(FakeAdapter):
    """A chat platform in memory: a test says a message into its sink, reads its calls."""

    platform: str = NAME
    token: str = ""


built: list[LoopbackAdapter] = []
"""Every adapter the factory made, in order (a leased bot's fresh ones included)."""


def build(section: LoopbackSection, context: AdapterContext) -> Adapter:
    adapter = LoopbackAdapter(token=section.token)
    built.append(adapter)
    return adapter


def lease_credential(adapter: Adapter) -> str:
    if not isinstance(adapter, LoopbackAdapter):
        raise TypeError(f"not a loopback adapter: {adapter!r}")
    return adapter.token


PLATFORM = Platform(NAME, LoopbackSection, build, lease_credential=lease_credential)
