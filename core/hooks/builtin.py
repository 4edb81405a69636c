"""Built-in policy hooks, registered through the same :class:`HookRegistry` as user hooks.

The dangerous-command policy is a ``pre_tool_call`` hook: a command for a shell tool
(``terminal`` by default) that matches :data:`DANGEROUS_PATTERNS` gets
``AskUser(prompt)``; so does every call of a tool whose risk is ``dangerous`` when
``ask_for_dangerous_tools`` is on. The prompt shows the command with the configured
secrets redacted (:func:`core.redaction.redact`), so an approval card never leaks the
gateway's keys into a group chat.

The pattern list is a tripwire for honest mistakes, not a sandbox: a model that wants to
hide ``rm -rf`` behind quoting or ``eval`` can. Real confinement is the workspace and the
operating system's permissions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.hooks.registry import HookRegistry
from core.hooks.results import AskUser
from core.redaction import redact

BUILTIN_PRIORITY = 50
"""Built-in policies run before user hooks registered at the default priority (100)."""

MAX_SHOWN_CHARS = 600

DANGEROUS_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, flags))
    for label, pattern, flags in (
        ("recursive delete", r"\brm\s+(?:-\S+\s+)*(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b", 0),
        ("filesystem format", r"\bmkfs(?:\.\w+)?\b", 0),
        ("raw disk write", r"\bdd\b[^\n;|&]*\bof=", 0),
        ("write to a block device", r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*", 0),
        ("shutdown or reboot", r"\b(?:shutdown|reboot|halt|poweroff)\b|\binit\s+[06]\b", 0),
        ("world-writable permissions", r"\bchmod\s+(?:-\S+\s+)*0?777\b", 0),
        ("recursive ownership/permission change", r"\bch(?:own|mod)\s+(?:-\S+\s+)*-R\b", 0),
        (
            "pipe from the network into a shell",
            r"\b(?:curl|wget)\b[^\n;]*\|\s*(?:sudo\s+)?\w*sh\b",
            0,
        ),
        ("force push", r"\bgit\s+push\b[^\n;|&]*(?:--force\b|--force-with-lease\b|\s-f\b)", 0),
        ("hard reset or clean", r"\bgit\s+(?:reset\s+--hard|clean\s+-\S*f)", 0),
        ("dropping a database object", r"\bdrop\s+(?:table|database|schema)\b", re.IGNORECASE),
        (
            "deleting all rows",
            r"\b(?:truncate\s+table|delete\s+from\s+\w+\s*(?:;|$))",
            re.IGNORECASE,
        ),
        ("fork bomb", r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", 0),
        ("find with delete", r"\bfind\b[^\n;|&]*\s-delete\b", 0),
        ("overwrite a system file", r">\s*/(?:etc|boot|usr|bin|sbin|lib)/", 0),
        ("privilege escalation", r"\bsudo\b", 0),
    )
)
"""(label, pattern): any match makes a shell command ask first."""


def dangerous_reasons(command: str) -> list[str]:
    """Labels of every dangerous pattern ``command`` matches (empty: none)."""
    return [label for label, pattern in DANGEROUS_PATTERNS if pattern.search(command)]


@dataclass(frozen=True, slots=True)
class CommandPolicy:
    """The ``pre_tool_call`` hook of the dangerous-command policy."""

    shell_tools: frozenset[str] = frozenset({"terminal"})
    ask_for_dangerous_tools: bool = False

    def __call__(
        self, *, tool_name: str, arguments: dict[str, Any], risk: str = "safe", **_: Any
    ) -> AskUser | None:
        command = arguments.get("command")
        if tool_name in self.shell_tools and isinstance(command, str):
            reasons = dangerous_reasons(command)
            if reasons:
                return AskUser(_command_prompt(command, reasons))
        if self.ask_for_dangerous_tools and risk == "dangerous":
            return AskUser(_tool_prompt(tool_name, arguments))
        return None


def register_builtin_hooks(
    registry: HookRegistry,
    *,
    ask_for_dangerous_tools: bool = False,
    shell_tools: Sequence[str] = ("terminal",),
) -> CommandPolicy:
    """Register the built-in policies; returns the command policy that was registered."""
    policy = CommandPolicy(frozenset(shell_tools), ask_for_dangerous_tools)
    registry.register(
        "pre_tool_call", policy, priority=BUILTIN_PRIORITY, source="builtin:dangerous-commands"
    )
    return policy


def _command_prompt(command: str, reasons: list[str]) -> str:
    return f"Run this command? It looks risky ({', '.join(reasons)}).\n\n{_shown(command)}"


def _tool_prompt(tool_name: str, arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False, default=str)
    return f"Allow the dangerous tool {tool_name}?\n\n{_shown(shown)}"


def _shown(text: str) -> str:
    text = redact(text)
    if len(text) > MAX_SHOWN_CHARS:
        return text[:MAX_SHOWN_CHARS] + f"… [{len(text) - MAX_SHOWN_CHARS} more chars]"
    return text
