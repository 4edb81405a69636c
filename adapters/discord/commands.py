"""Slash commands: the gateway's chat commands as Discord application commands, synced
only when the set changed.

Each command answers its interaction at once with a deferred "thinking" response (well
inside Discord's 3 s), then hands the command to the adapter. Options: ``/steer``,
``/redirect`` and ``/queue`` take ``text``; ``/approve`` an optional ``id``; ``/deny`` an
optional ``id`` and ``reason``.

Sync: a digest of the exact payload discord.py would send is kept in the store's
``command_syncs`` table (:meth:`core.store.base.Store.synced_commands`), per guild when
``guild_ids`` is configured, else global. A restart with an unchanged set syncs nothing,
so command-management rate limits and the delete-then-recreate window are never hit for
nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import discord
from discord import app_commands

from adapters.discord.normalize import PLATFORM
from core.store.base import Store

_log = logging.getLogger(__name__)

OnCommand = Callable[[discord.Interaction, str, str], Awaitable[None]]
"""``(interaction, command name, args)``: the interaction is already deferred."""
OnError = Callable[[discord.Interaction, app_commands.AppCommandError], Coroutine[Any, Any, None]]
"""A command interaction discord.py could not map to a command (its shape was odd)."""
WITH_TEXT = frozenset({"steer", "redirect", "queue"})


def _command(
    name: str, description: str, on_command: OnCommand
) -> app_commands.Command[Any, ..., None]:
    async def plain(interaction: discord.Interaction) -> None:
        await _deferred(interaction, name, "", on_command)

    async def with_text(interaction: discord.Interaction, text: str) -> None:
        await _deferred(interaction, name, text, on_command)

    async def approve(interaction: discord.Interaction, id: str | None = None) -> None:
        await _deferred(interaction, name, id or "", on_command)

    async def deny(
        interaction: discord.Interaction, id: str | None = None, reason: str | None = None
    ) -> None:
        await _deferred(interaction, name, " ".join(filter(None, [id, reason])), on_command)

    callbacks: dict[str, Callable[..., Coroutine[Any, Any, None]]] = {
        "approve": approve,
        "deny": deny,
    }
    callback = callbacks.get(name, with_text if name in WITH_TEXT else plain)
    return app_commands.Command(name=name, description=description[:100], callback=callback)


async def _deferred(
    interaction: discord.Interaction, name: str, args: str, on_command: OnCommand
) -> None:
    await interaction.response.defer(thinking=True)
    await on_command(interaction, name, args)


class CommandTree(app_commands.CommandTree[Any]):
    """discord.py's tree, refusing (to ``on_error``) a command whose data it could not
    read: its invoker task only catches ``AppCommandError``, anything else it raises on an
    odd shape would be a task exception nobody retrieves and the command unanswered."""

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        problem = unreadable_command(interaction.data)
        if not isinstance(interaction.guild_id, int | None):
            problem = "the interaction's guild_id is not a snowflake"
        if problem is None:
            return True
        await self.on_error(interaction, app_commands.AppCommandError(problem))
        return False


def unreadable_command(data: object) -> str | None:
    """Why the tree could not read this interaction's ``data`` as one of our commands (all
    slash commands with string options); None when it can."""
    if not isinstance(data, dict):
        return "the command's data is not an object"
    if data.get("type", 1) != 1 or not isinstance(data.get("name"), str):
        return "not a slash command with a name"
    guild = data.get("guild_id")
    if guild is not None and not str(guild).isdigit():
        return "the command's guild_id is not a snowflake"
    options = data.get("options", [])
    if not isinstance(options, list) or not all(map(_string_option, options)):
        return "the command's options are not string options"
    if not isinstance(data.get("resolved", {}), dict):
        return "the command's resolved data is not an object"
    return None


def _string_option(option: object) -> bool:
    return (
        isinstance(option, dict)
        and isinstance(option.get("name"), str)
        and option.get("type", 3) == 3
        and isinstance(option.get("value", ""), str)
    )


def build_tree(
    client: discord.Client, menu: Sequence[tuple[str, str]], on_command: OnCommand,
    on_error: OnError,
) -> app_commands.CommandTree[Any]:  # fmt: skip
    tree = CommandTree(client)
    tree.error(on_error)
    for name, description in menu:
        tree.add_command(_command(name, description, on_command))
    return tree


def _digest(tree: app_commands.CommandTree[Any], guild: discord.Object | None) -> str:
    payload = [command.to_dict(tree) for command in tree.get_commands(guild=guild)]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


async def sync_commands(
    tree: app_commands.CommandTree[Any], store: Store, guild_ids: Sequence[str]
) -> int:
    """Sync each scope whose command set changed since its last sync; returns how many
    scopes were synced (0 on a restart with the same set)."""
    synced = 0
    scopes: list[discord.Object | None] = [discord.Object(int(g)) for g in guild_ids] or [None]
    for guild in scopes:
        if guild is not None:
            tree.copy_global_to(guild=guild)
        scope = str(guild.id) if guild is not None else "global"
        digest = _digest(tree, guild)
        if await store.synced_commands(PLATFORM, scope) == digest:
            continue
        await tree.sync(guild=guild)
        await store.set_synced_commands(PLATFORM, scope, digest)
        _log.info("discord: slash commands synced (%s)", scope)
        synced += 1
    return synced
