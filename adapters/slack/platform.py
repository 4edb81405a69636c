"""Slack as a registered platform: its ``[slack]`` section and its adapter factory.

Importing this module imports no SDK; slack-bolt is loaded when the factory runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from adapters.base import Adapter, StreamingMode
from adapters.config import (
    GroupChatSection,
    HttpUrl,
    Listen,
    PositiveNumber,
    Text,
    choice,
    secret_field,
)
from adapters.config_reader import Check
from adapters.platforms import AdapterContext, Platform

SlackMode = Literal["socket", "http"]


class SlackSection(GroupChatSection):
    bot_token: str = secret_field("COMMONOS_SLACK_BOT_TOKEN", "")
    app_token: str | None = secret_field("COMMONOS_SLACK_APP_TOKEN")
    signing_secret: str | None = secret_field("COMMONOS_SLACK_SIGNING_SECRET")
    api_base_url: HttpUrl = "https://slack.com/api/"
    mode: Annotated[SlackMode, Check(choice("socket", "http"))] = "socket"
    http_listen: Listen = "127.0.0.1:3000"
    http_path: Text = "/slack/events"
    command_prefix: Text = "/"
    """Slash commands are ``<command_prefix><name>`` (``/stop``; ``/agent-`` → ``/agent-stop``)."""
    text_command_prefix: Text = "!"
    """Commands typed as text, where Slack refuses slash commands (threads): ``!stop``."""
    edit_interval: PositiveNumber = 1.2
    watchdog_seconds: PositiveNumber = 60.0
    status_text: Text = "is thinking…"
    streaming: Annotated[StreamingMode, Check(choice("native", "edit", "off"))] = "native"
    """An answer shown while it is written: ``native`` (the default) a chat stream in
    threads, the stream's message then becoming the reply (edits where Slack refuses a
    stream, such as a DM's top level); ``edit`` one message edited in place; ``off`` the
    reply when the turn ends (docs/architecture.md, "Streaming")."""

    def problems(self) -> Iterator[tuple[str, str]]:
        needed = "app_token" if self.mode == "socket" else "signing_secret"
        missing = [
            self.missing_secret("bot_token"),
            self.missing_secret(needed, f'(mode = "{self.mode}")'),
        ]
        yield from filter(None, missing)
        if not self.http_path.startswith("/"):
            yield "http_path", f'expected a path starting with "/", got "{self.http_path}"'


def build(section: SlackSection, context: AdapterContext) -> Adapter:
    from adapters.session_keys import KeyStrategy, key_rule
    from adapters.slack.adapter import SlackAdapter, SlackSettings

    host, _, port = section.http_listen.rpartition(":")
    api = section.api_base_url
    settings = SlackSettings(
        api_base_url=api if api.endswith("/") else api + "/",
        mode=section.mode,
        app_token=section.app_token or "",
        signing_secret=section.signing_secret or "",
        http_host=host,
        http_port=int(port),
        http_path=section.http_path,
        slash_prefix=section.command_prefix,
        text_prefix=section.text_command_prefix,
        commands=context.commands,
        edit_interval=section.edit_interval,
        watchdog_seconds=section.watchdog_seconds,
        status_text=section.status_text,
        streaming=section.streaming,
    )
    rule = key_rule(KeyStrategy(group=section.group_sessions))
    return SlackAdapter(
        section.bot_token,
        context.store,
        settings,
        key_rule=rule,
    )


def lease_credential(adapter: Adapter) -> str:
    """The credential that names this bot in a cluster's lease (adapters/platforms.py)."""
    from adapters.slack.adapter import SlackAdapter

    if not isinstance(adapter, SlackAdapter):
        raise TypeError(f"not a slack adapter: {adapter!r}")
    return adapter.settings.app_token or str(adapter.client.token)


PLATFORM = Platform("slack", SlackSection, build, lease_credential=lease_credential)
