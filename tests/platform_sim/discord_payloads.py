"""Discord JSON shapes as discord.py 2.7 requires them (snowflakes are strings)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]
GUILD_TEXT, DM, PUBLIC_THREAD = 0, 1, 11
EPOCH_MS = 1420070400000


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


@dataclass(frozen=True, slots=True)
class DcUser:
    id: str
    username: str
    bot: bool = False

    def to_json(self) -> Json:
        return {"id": self.id, "username": self.username, "discriminator": "0",
                "global_name": self.username.title(), "avatar": None, "bot": self.bot}  # fmt: skip


ALICE = DcUser("3001", "alice")
BOB = DcUser("3002", "bob")


@dataclass(slots=True)
class DcChannel:
    """A guild text channel, a DM channel (``recipient``), or a thread (``parent_id``)."""

    id: str
    type: int
    name: str = ""
    guild_id: str | None = None
    parent_id: str | None = None
    recipient: DcUser | None = None
    position: int = 0
    owner_id: str = ALICE.id

    def to_json(self) -> Json:
        data: Json = {"id": self.id, "type": self.type, "last_message_id": None}
        if self.type == DM and self.recipient is not None:
            return data | {"recipients": [self.recipient.to_json()]}
        data |= {"name": self.name, "position": self.position, "guild_id": self.guild_id,
                 "permission_overwrites": [], "nsfw": False,
                 "parent_id": self.parent_id}  # fmt: skip
        if self.type == PUBLIC_THREAD:
            data |= {"owner_id": self.owner_id, "message_count": 0, "member_count": 1,
                     "rate_limit_per_user": 0, "flags": 0, "thread_metadata": {
                         "archived": False, "auto_archive_duration": 1440, "locked": False,
                         "archive_timestamp": now_iso()}}  # fmt: skip
        return data


@dataclass(slots=True)
class DcGuild:
    id: str
    name: str
    channels: list[DcChannel] = field(default_factory=list)
    members: list[DcUser] = field(default_factory=list)

    def to_json(self) -> Json:
        everyone = {"id": self.id, "name": "@everyone", "permissions": "1071698660929",
                    "position": 0, "color": 0, "hoist": False, "managed": False,
                    "mentionable": False, "flags": 0}  # fmt: skip
        plain = [c for c in self.channels if c.type != PUBLIC_THREAD]
        threads = [c for c in self.channels if c.type == PUBLIC_THREAD]
        return {"id": self.id, "name": self.name, "member_count": len(self.members),
                "roles": [everyone], "channels": [c.to_json() for c in plain],
                "threads": [c.to_json() for c in threads], "emojis": [], "stickers": [],
                "members": [member(u) for u in self.members], "owner_id": ALICE.id,
                "features": [], "unavailable": False, "large": False,
                "joined_at": now_iso(), "premium_tier": 0, "verification_level": 0,
                "default_message_notifications": 0, "explicit_content_filter": 0,
                "mfa_level": 0, "nsfw_level": 0, "preferred_locale": "en-US",
                "system_channel_flags": 0, "voice_states": [], "presences": []}  # fmt: skip


def member(user: DcUser) -> Json:
    return {"user": user.to_json(), "roles": [], "joined_at": now_iso(), "deaf": False,
            "mute": False, "flags": 0}  # fmt: skip


def message_json(
    msg_id: str, channel: DcChannel, author: DcUser, content: str, **extra: Any
) -> Json:
    data: Json = {"id": msg_id, "channel_id": channel.id, "author": author.to_json(),
                  "content": content, "timestamp": now_iso(), "edited_timestamp": None,
                  "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
                  "attachments": [], "embeds": [], "components": [], "pinned": False,
                  "type": 0, "flags": 0}  # fmt: skip
    if channel.guild_id is not None:
        data["guild_id"] = channel.guild_id
        if not author.bot:
            data["member"] = {k: v for k, v in member(author).items() if k != "user"}
    return data | extra


def app_info(app_id: str, bot: DcUser) -> Json:
    return {"id": app_id, "name": "Test App", "icon": None, "description": "",
            "bot_public": True, "bot_require_code_grant": False, "verify_key": "00" * 32,
            "owner": ALICE.to_json(), "flags": 0, "bot": bot.to_json(),
            "summary": "", "rpc_origins": []}  # fmt: skip


def interaction_json(
    ident: str, token: str, app_id: str, channel: DcChannel, user: DcUser, **extra: Any
) -> Json:
    data: Json = {"id": ident, "application_id": app_id, "token": token, "version": 1,
                  "channel_id": channel.id, "channel": channel.to_json(), "locale": "en-US",
                  "app_permissions": "1071698660929", "entitlements": [],
                  "attachment_size_limit": 10485760}  # fmt: skip
    if channel.guild_id is not None:
        data |= {"guild_id": channel.guild_id, "member": member(user), "context": 0,
                 "guild_locale": "en-US",
                 "authorizing_integration_owners": {"0": channel.guild_id}}  # fmt: skip
    else:
        data |= {"user": user.to_json(), "context": 1,
                 "authorizing_integration_owners": {"1": user.id}}  # fmt: skip
    return data | extra


def buttons_of(components: list[Json]) -> list[tuple[str, str | None, str | None]]:
    """(label, custom_id, url) for every button in the action rows."""
    found = []
    for row in components:
        for c in row.get("components", []):
            if c.get("type") == 2:
                found.append((str(c.get("label", "")), c.get("custom_id"), c.get("url")))
    return found


def snowflake_time_ms(snowflake: str) -> int:
    return (int(snowflake) >> 22) + EPOCH_MS
