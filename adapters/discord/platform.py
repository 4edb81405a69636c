"""Discord as a registered platform: its ``[discord]`` section and its adapter factory.

Importing this module imports no SDK; discord.py is loaded when the factory runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from adapters.base import Adapter, StreamingMode
from adapters.config import (
    Flag,
    GroupChatSection,
    HttpUrl,
    PositiveNumber,
    Texts,
    WsUrl,
    choice,
    secret_field,
)
from adapters.config_reader import Check
from adapters.platforms import AdapterContext, Platform


class DiscordSection(GroupChatSection):
    token: str = secret_field("COMMONOS_DISCORD_TOKEN", "")
    api_base: HttpUrl = "https://discord.com/api/v10"
    gateway_url: WsUrl | None = None
    message_content: Flag = True
    """The privileged Message Content intent: without it only DMs, mentions and slash
    commands reach the bot (enable it in the Developer Portal when true)."""
    thread_per_conversation: Flag = True
    """A mention in a guild channel opens a thread; the conversation continues there."""
    guild_ids: Texts = ()
    """Sync slash commands to these guilds (instant); empty: globally."""
    edit_interval: PositiveNumber = 1.0
    """Minimum seconds between edits of one message (progress)."""
    streaming: Annotated[StreamingMode, Check(choice("native", "edit", "off"))] = "native"
    """An answer shown while it is written: Discord has no native stream, so ``native``
    (the default) and ``edit`` both edit one message in place within the channel's edit
    budget; ``off`` sends the reply when the turn ends (docs/architecture.md, "Streaming")."""

    def problems(self) -> Iterator[tuple[str, str]]:
        yield from filter(None, [self.missing_secret("token")])
        for guild in self.guild_ids:
            if not guild.isdigit():
                yield "guild_ids", f"expected guild ids (digits), got {guild!r}"


def build(section: DiscordSection, context: AdapterContext) -> Adapter:
    from adapters.discord.adapter import DiscordAdapter, DiscordSettings
    from adapters.session_keys import KeyStrategy, key_rule

    openers = section.allowed_users | section.approvers
    settings = DiscordSettings(
        api_base=section.api_base,
        gateway_url=section.gateway_url,
        message_content=section.message_content,
        thread_per_conversation=section.thread_per_conversation,
        guild_ids=tuple(section.guild_ids),
        edit_interval=section.edit_interval,
        streaming=section.streaming,
        commands=context.commands,
        thread_openers=frozenset(openers),
    )
    rule = key_rule(KeyStrategy(group=section.group_sessions))
    return DiscordAdapter(
        section.token,
        context.store,
        settings,
        key_rule=rule,
    )


def lease_credential(adapter: Adapter) -> str:
    """The credential that names this bot in a cluster's lease (adapters/platforms.py)."""
    from adapters.discord.adapter import DiscordAdapter

    if not isinstance(adapter, DiscordAdapter):
        raise TypeError(f"not a discord adapter: {adapter!r}")
    return adapter.token


PLATFORM = Platform("discord", DiscordSection, build, lease_credential=lease_credential)
