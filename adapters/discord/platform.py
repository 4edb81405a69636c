"""Discord as a registered platform: its ``[discord]`` section (the adapter is not built yet)."""

from __future__ import annotations

from collections.abc import Iterator

from adapters.config import HttpUrl, PlatformSection, WsUrl, secret_field
from adapters.platforms import Platform


class DiscordSection(PlatformSection):
    token: str = secret_field("COMMONOS_DISCORD_TOKEN", "")
    api_base: HttpUrl = "https://discord.com/api/v10"
    gateway_url: WsUrl | None = None

    def problems(self) -> Iterator[tuple[str, str]]:
        yield from filter(None, [self.missing_secret("token")])


PLATFORM = Platform("discord", DiscordSection, None)
