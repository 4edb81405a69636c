"""Values of the Telegram simulator: users, chats, updates, limits and the API error."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tests.platform_sim.base import Json, SimMessage


class TgApiError(Exception):
    """A Bot API error answer: HTTP ``status`` with ``description`` (and retry_after on 429)."""

    def __init__(self, status: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after

    def body(self) -> Json:
        body: Json = {"ok": False, "error_code": self.status, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


def bad_request(what: str) -> TgApiError:
    return TgApiError(400, f"Bad Request: {what}")


@dataclass(frozen=True, slots=True)
class TgUser:
    id: int
    first_name: str
    username: str | None = None
    is_bot: bool = False

    def to_json(self) -> Json:
        data: Json = {"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name}
        if self.username:
            data["username"] = self.username
        return data


ALICE = TgUser(42, "Alice", "alice")
BOB = TgUser(43, "Bob", "bob")


@dataclass(slots=True)
class TgChat:
    """A chat: ``type`` private / group / supergroup / channel; forums have ``topics``."""

    id: int
    type: str
    title: str | None = None
    is_forum: bool = False
    topics: set[int] = field(default_factory=set)
    owner: TgUser | None = None

    def to_json(self) -> Json:
        data: Json = {"id": self.id, "type": self.type}
        if self.title:
            data["title"] = self.title
        if self.owner is not None:
            data["first_name"] = self.owner.first_name
            if self.owner.username:
                data["username"] = self.owner.username
        if self.is_forum:
            data["is_forum"] = True
        return data


@dataclass(slots=True)
class TgUpdate:
    """One update; confirmed by a later getUpdates offset (or a 2xx webhook answer)."""

    update_id: int
    kind: str
    payload: Json
    deliveries: int = 0
    confirmed_at: float | None = None
    raw: Json | None = None
    """Sent as is instead of ``{update_id, kind: payload}`` (``TelegramSim.push_raw``)."""

    def to_json(self) -> Json:
        if self.raw is not None:
            return self.raw
        return {"update_id": self.update_id, self.kind: self.payload}


@dataclass(frozen=True, slots=True)
class Confirmation:
    offset: int
    update_ids: list[int]
    at: float


@dataclass(slots=True)
class CallbackQuery:
    id: str
    message: SimMessage
    data: str
    user: TgUser
    created: float
    answer: Json | None = None


@dataclass(frozen=True, slots=True)
class FloodLimits:
    """Flood control on sends and edits: ``per_chat`` / ``total`` requests per ``window`` s.

    Over the limit the answer is 429 with ``retry_after`` (or the time until the window
    frees, rounded up to whole seconds as Telegram does, when ``retry_after`` is ``None``).
    """

    per_chat: int = 20
    total: int = 30
    window: float = 1.0
    retry_after: float | None = None
    chat_bursts: ChatBursts | None = None
    """Telegram's per-chat behaviour instead of ``per_chat`` for new messages and drafts
    (opt-in; edits then count in ``total`` only)."""


@dataclass(frozen=True, slots=True)
class ChatBursts:
    """A chat's flood control as Telegram behaves (core.telegram.org/bots/faq: about one
    message a second, short bursts allowed, then 429): a token bucket of ``burst`` messages
    refilled ``per_second``. Over it the answer is HTTP 429 with the real Bot API body,
    ``retry_after`` the whole seconds until the bucket holds a message again (at least 1)."""

    burst: int = 6
    per_second: float = 1.0


class ChatBucket:
    """One chat's tokens under :class:`ChatBursts`, measured on the simulator's clock."""

    def __init__(self, bursts: ChatBursts, now: float) -> None:
        self.bursts, self.tokens, self.at = bursts, float(bursts.burst), now

    def take(self, now: float) -> int | None:
        """Count one message; ``None`` when it may go, else the ``retry_after`` to answer."""
        rate = self.bursts.per_second
        self.tokens = min(float(self.bursts.burst), self.tokens + (now - self.at) * rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - self.tokens) / rate))


@dataclass(slots=True)
class Webhook:
    url: str
    secret_token: str | None
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class Upload:
    """A file the bot uploaded (multipart part): kept so tests and getFile can read it back."""

    filename: str
    content_type: str
    data: bytes

    @classmethod
    def of(cls, part: Any) -> Upload:
        return cls(part.filename, part.content_type, part.file.read())
