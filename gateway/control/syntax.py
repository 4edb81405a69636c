"""The chat commands the router understands, and the button payloads it decodes.

``COMMANDS`` is the menu an adapter registers with its platform (Telegram
``setMyCommands``, Discord slash commands): name without ``/``, short description.

Button payloads carry the approval id — never the session — so a stale card can only ever
answer its own request (the incumbent bound buttons to the session; a stale click answered
a newer request)::

    ap:<approval_id>:a    approve
    ap:<approval_id>:d    deny
    ap:<approval_id>:s    approve, and always for this session
    ch:<approval_id>:<n>  the n-th choice of a ``clarify`` question
    st:<stop_id>          the Stop button of one turn's progress message
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from core.approvals import ResolveOutcome


@dataclass(frozen=True, slots=True)
class CommandInfo:
    name: str
    description: str


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("start", "Say hello"),
    CommandInfo("help", "What I can do"),
    CommandInfo("new", "Start a fresh session (alias /reset)"),
    CommandInfo("stop", "Stop the current task"),
    CommandInfo("steer", "Add a note the agent sees after the current tool"),
    CommandInfo("redirect", "Correct the current task"),
    CommandInfo("queue", "Run this after the current task"),
    CommandInfo("status", "What I am doing"),
    CommandInfo("compact", "Summarise the older messages to free the context"),
    CommandInfo("approve", "Approve the pending request (optionally by id)"),
    CommandInfo("deny", "Deny the pending request (optionally by id and reason)"),
    CommandInfo("model", "Show or switch this chat's model"),
    CommandInfo("busy", "What a message does while I work: queue, interrupt or steer"),
    CommandInfo("progress", "How much progress this chat shows: all, tools or off"),
    CommandInfo("verbose", "Show tool arguments in progress: on or off"),
    CommandInfo("link", "Join this conversation with your chat on another platform"),
    CommandInfo("unlink", "Stop sharing this conversation across platforms"),
    CommandInfo("pair", "Owners: approve, list or revoke new users"),
    CommandInfo("usage", "Your model tokens and cost today and this month"),
)


def command_menu() -> tuple[tuple[str, str], ...]:
    """``(name, description)`` pairs, for a platform's command menu."""
    return tuple((c.name, c.description) for c in COMMANDS)


ALIASES = {"reset": "new", "q": "queue"}

ApproveAction = Literal["a", "d", "s"]
_INDEX = re.compile(r"[0-9]{1,4}")
"""A choice index: ASCII digits only (``str.isdigit`` accepts "²", which ``int`` refuses)."""


@dataclass(frozen=True, slots=True)
class ApprovalPress:
    approval_id: str
    outcome: ResolveOutcome
    always: bool = False


@dataclass(frozen=True, slots=True)
class ChoicePress:
    approval_id: str
    index: int


@dataclass(frozen=True, slots=True)
class StopPress:
    stop_id: str


Press = ApprovalPress | ChoicePress | StopPress


STOP_PAYLOAD = "st:"
"""A Stop button's payload: this, then its turn's stop id (``StopButtons.register``)."""


def approval_payload(approval_id: str, action: ApproveAction) -> str:
    return f"ap:{approval_id}:{action}"


def choice_payload(approval_id: str, index: int) -> str:
    return f"ch:{approval_id}:{index}"


def parse_press(data: str | None) -> Press | None:
    """Decode a button payload; None when it is not one of ours (never raises)."""
    kind, _, rest = (data or "").partition(":")
    if kind == "st" and rest:
        return StopPress(rest)
    approval_id, _, action = rest.rpartition(":")
    if not approval_id:
        return None
    if kind == "ap" and action in ("a", "d", "s"):
        return ApprovalPress(approval_id, "denied" if action == "d" else "approved", action == "s")
    if kind == "ch" and _INDEX.fullmatch(action):
        return ChoicePress(approval_id, int(action))
    return None


def canonical(command: str) -> str:
    return ALIASES.get(command, command)


def help_text() -> str:
    lines = [f"/{c.name} — {c.description}" for c in COMMANDS]
    return "Send me a message and I'll get to work.\n\n" + "\n".join(lines)
