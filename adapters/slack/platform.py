"""Slack as a registered platform: its ``[slack]`` section (the adapter is not built yet)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import BeforeValidator

from adapters.config import HttpUrl, Listen, PlatformSection, choice, secret_field
from adapters.platforms import Platform

SlackMode = Literal["socket", "http"]


class SlackSection(PlatformSection):
    bot_token: str = secret_field("COMMONOS_SLACK_BOT_TOKEN", "")
    app_token: str | None = secret_field("COMMONOS_SLACK_APP_TOKEN")
    signing_secret: str | None = secret_field("COMMONOS_SLACK_SIGNING_SECRET")
    api_base_url: HttpUrl = "https://slack.com/api/"
    mode: Annotated[SlackMode, BeforeValidator(choice("socket", "http"))] = "socket"
    http_listen: Listen = "127.0.0.1:3000"

    def problems(self) -> Iterator[tuple[str, str]]:
        needed = "app_token" if self.mode == "socket" else "signing_secret"
        missing = [
            self.missing_secret("bot_token"),
            self.missing_secret(needed, f'(mode = "{self.mode}")'),
        ]
        yield from filter(None, missing)


PLATFORM = Platform("slack", SlackSection, None)
