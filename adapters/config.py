"""What a ``config.toml`` section is built from: value kinds, secrets, the chat rules.

Every section of the configuration — the gateway's own and each platform's (declared in
its adapter package) — is a frozen dataclass (:class:`adapters.config_reader.Table`) made
of the value kinds below. Each kind
checks a raw TOML value and, when it is wrong, raises an error whose message is already
the one the user reads (``expected a positive integer, got -3``); the loader
(``gateway.config``) only prefixes the file and the key path. One declaration per key
thus gives validation, the default, the env var of a secret and how ``check-config``
shows it.

A secret field is declared with :func:`secret_field`: it names its env var (which wins
over the file) and is masked whenever the configuration is shown. A section can report
problems between its keys (a secret required by a mode, say) from :meth:`Section.problems`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from adapters.config_reader import Check, Table, got, invalid, show, suggest

GroupSessions = Literal["per_user", "shared"]
EVERYONE = "*"
BOT_EXCHANGES_PER_MINUTE = 10
BOT_MUTE_SECONDS = 600.0
"""``bot_exchanges_per_minute`` and ``bot_mute_seconds`` (gateway/control/bot_guard.py)."""
NAME = re.compile(r"^[A-Za-z0-9_-]+\Z")
"""A name of letters, digits, ``_`` or ``-`` (``\\Z``: not even a newline after it)."""
PAIRING_TTL = 3600.0
"""Seconds a pairing code stays valid (``pairing_ttl``; gateway/inbound/pairing.py)."""


# value kinds -------------------------------------------------------------------------
def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(minimum: int, what: str) -> Callable[[object], int]:
    def check(value: object) -> int:
        if not _is_int(value):
            raise invalid(f"expected {what}, {got(value)}")
        assert isinstance(value, int)
        if value < minimum:
            raise invalid(f"expected {what}, got {value}")
        return value

    return check


def _number(minimum: float, what: str, *, inclusive: bool) -> Callable[[object], float]:
    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(f"expected {what}, {got(value)}")
        low = value < minimum if inclusive else value <= minimum
        if not math.isfinite(value) or low:
            raise invalid(f"expected {what}, got {value}")
        return float(value)

    return check


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"expected a non-empty string, {got(value)}")
    return value


def _prefixed(prefixes: tuple[str, ...], what: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        text = _text(value)
        if not text.startswith(prefixes):
            raise invalid(f"expected {what} URL, got {show(text)}")
        return text

    return check


def _listen(value: object) -> str:
    text = _text(value)
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise invalid(f'expected "host:port" (e.g. "127.0.0.1:8080"), got {show(text)}')
    return text


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"expected true or false, {got(value)}")
    return value


def _array(value: object) -> object:
    if not isinstance(value, list | tuple):
        raise invalid(f"expected an array, {got(value)}")
    return value


def _user_id(value: object) -> str:
    if (isinstance(value, str) and value) or _is_int(value):
        return str(value)
    raise invalid(f"expected a user id (string or integer), {got(value)}")


def _bot_ids(value: object) -> object:
    """``allow_bots``: true (every bot), false (none) or an array of bot ids."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, list | tuple):
        raise invalid(f"expected true, false or an array of bot ids, {got(value)}")
    return frozenset(_user_id(item) for item in value)


def _no_wildcard(ids: frozenset[str]) -> frozenset[str]:
    if EVERYONE in ids:
        raise invalid(f'approvers must be explicit user ids; "{EVERYONE}" would let anyone approve')
    return ids


def _table(value: object) -> object:
    if not isinstance(value, dict):
        raise invalid(f"expected a table, {got(value)}")
    return value


def choice(*options: str) -> Callable[[object], str]:
    """A value that must be one of ``options`` (for a ``Literal`` field)."""

    def check(value: object) -> str:
        if value in options:
            return str(value)
        expected = ", ".join(json.dumps(option) for option in options)
        raise invalid(f"expected one of {expected}, {got(value)}{suggest(value, options)}")

    return check


PositiveInt = Annotated[int, Check(_integer(1, "a positive integer"))]
NonNegativeInt = Annotated[int, Check(_integer(0, "an integer ≥ 0"))]
PositiveNumber = Annotated[float, Check(_number(0, "a positive number", inclusive=False))]
NonNegativeNumber = Annotated[float, Check(_number(0, "a number ≥ 0", inclusive=True))]
SecondsOrOff = Annotated[
    float, Check(_number(0, "a number of seconds ≥ 0 (0 turns it off)", inclusive=True))
]
Text = Annotated[str, Check(_text)]
HttpUrl = Annotated[str, Check(_prefixed(("http://", "https://"), "an http:// or https://"))]
WsUrl = Annotated[str, Check(_prefixed(("ws://", "wss://"), "a ws:// or wss://"))]
Listen = Annotated[str, Check(_listen)]
Flag = Annotated[bool, Check(_boolean)]
Texts = Annotated[tuple[Text, ...], Check(_array)]
UserId = Annotated[str, Check(_user_id)]
UserIds = Annotated[frozenset[UserId], Check(_array)]
ApproverIds = Annotated[frozenset[UserId], Check(_array), Check(_no_wildcard, after=True)]
Headers = Annotated[dict[str, Text], Check(_table)]
BotIds = Annotated[bool | frozenset[str], Check(_bot_ids)]


# sections ----------------------------------------------------------------------------
def secret_field(env: str, default: str | None = None) -> Any:
    """A field holding a secret: its env var wins over the file; shown masked."""
    return dataclasses.field(default=default, repr=False, metadata={"secret": env})


class Section(Table):
    """One ``config.toml`` table: unknown keys are errors, values frozen once read."""

    def problems(self) -> Iterator[tuple[str, str]]:
        """``(key, message)`` for rules between keys; checked only for an enabled section."""
        return iter(())

    @classmethod
    def secret_env(cls) -> dict[str, str]:
        """``key → env var`` of every secret field."""
        return {
            f.name: f.metadata["secret"] for f in dataclasses.fields(cls) if "secret" in f.metadata
        }

    def missing_secret(self, key: str, why: str = "") -> tuple[str, str] | None:
        """The problem "missing secret" for ``key`` when it is empty, else None."""
        if getattr(self, key):
            return None
        because = f" {why}" if why else ""
        env = self.secret_env()[key]
        return key, f"missing secret{because}: set {key} here or the env var {env}"

    def secrets(self) -> list[str]:
        """The values of this section's secret fields that are set."""
        return [value for key in self.secret_env() if (value := getattr(self, key))]


class PlatformSection(Section):
    """A chat platform's table: ``enabled``, who may talk and who may approve."""

    enabled: Flag = True
    allowed_users: UserIds = frozenset()
    approvers: ApproverIds = frozenset()
    pairing: Flag = False
    """A stranger's DM gets a one-time code an owner approves (docs/pairing.md)."""
    owners: ApproverIds = frozenset()
    """Who approves pairing codes on this platform (with ``approvers``)."""
    pairing_ttl: PositiveNumber = PAIRING_TTL

    def implicit_users(self) -> frozenset[str]:
        """Users allowed without being listed (the web chat's own browser user)."""
        return frozenset()

    def mention_required(self) -> bool:
        """In a group, only messages that mention the bot (or reply to it) are for it."""
        return False

    def bots_allowed(self) -> bool | frozenset[str]:
        """Which bots are read: all (True), none (False) or those ids."""
        return False

    def bot_pace(self) -> tuple[int, float]:
        """Exchanges a minute with one bot, and the seconds it is muted after."""
        return BOT_EXCHANGES_PER_MINUTE, BOT_MUTE_SECONDS


class GroupChatSection(PlatformSection):
    """A platform with group chats: which conversations share a session, and whether a
    message there must mention the bot."""

    group_sessions: Annotated[GroupSessions, Check(choice("per_user", "shared"))] = "per_user"
    require_mention: Flag = True
    allow_bots: BotIds = False
    bot_exchanges_per_minute: PositiveInt = BOT_EXCHANGES_PER_MINUTE
    bot_mute_seconds: PositiveNumber = BOT_MUTE_SECONDS

    def mention_required(self) -> bool:
        return self.require_mention

    def bots_allowed(self) -> bool | frozenset[str]:
        return self.allow_bots

    def bot_pace(self) -> tuple[int, float]:
        return self.bot_exchanges_per_minute, self.bot_mute_seconds
