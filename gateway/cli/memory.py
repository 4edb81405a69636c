"""``commonos memory export PERSON [--output FILE]`` and ``commonos memory add --profile
NAME TEXT`` (README "Memory").

``export`` writes, as JSON, everything remembered about a person — ``PERSON`` is one of
their identities (``telegram:12345``); every identity linked to it is the same person —
with their memory settings: the person's own copy, for the operator to hand over.
``add`` writes a *profile* entry: seen by every session of that profile, in direct and
shared chats alike, so it is the operator's alone (the model can only write person and
chat entries). Both open the configured store directly, like ``commonos pair``, and work
whether or not ``[memory]`` is enabled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE = 1_000_000
"""More entries than any person holds (``max_entries_per_scope`` per identity)."""


class MemoryProblem(Exception):
    """One line for the operator; the command exits 1."""


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    config_option: Callable[[argparse.ArgumentParser], None],
) -> None:
    """The ``memory`` command and its actions on ``commonos``'s parser."""
    memory = commands.add_parser("memory", help="what the agent remembers (README 'Memory')")
    actions = memory.add_subparsers(dest="memory_action", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="everything remembered about a person, as JSON")
    export.add_argument("person", metavar="PLATFORM:USER", help="one of their identities")
    export.add_argument("--output", type=Path, metavar="FILE", help="default: stdout")
    config_option(export)
    export.set_defaults(handler=command)
    add = actions.add_parser("add", help="a profile entry, seen in all of its sessions")
    add.add_argument("--profile", required=True, metavar="NAME")
    add.add_argument("text", metavar="TEXT")
    config_option(add)
    add.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        if args.memory_action == "export":
            text = asyncio.run(_open(config, lambda s: export(s, args.person))) + "\n"
            _write(text, args.output)
        else:
            print(asyncio.run(_open(config, lambda s: add(s, config, args.profile, args.text))))
    except ConfigError as error:
        return _fail(error.errors)
    except (MemoryProblem, OSError) as error:
        return _fail([str(error)])
    return 0


async def _open(config: Any, work: Callable[[Any], Any]) -> Any:
    from gateway.stores import configured_store

    async with configured_store(config) as store:
        return await work(store)


async def export(store: Any, person: str) -> str:
    """The JSON document of everything remembered about ``person``."""
    from core.memory.scopes import linked_identities, person_owner
    from core.store.memory import memory_store

    platform, _, user = person.partition(":")
    if not platform or not user:
        raise MemoryProblem(f"expected PLATFORM:USER (e.g. telegram:12345), got {person!r}")
    memory = memory_store(store)
    identities = await linked_identities(store, person)
    entries = await memory.memories_of([person_owner(i) for i in identities], PAGE)
    settings = await memory.memory_settings(identities)
    document = {
        "person": person,
        "identities": list(identities),
        "settings": [{"identity": i, "setting": s, "chat": c or None} for i, s, c in settings],
        "entries": [_entry(e) for e in sorted(entries, key=lambda e: e.id)],
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


def _entry(entry: Any) -> dict[str, Any]:
    return {
        "id": entry.id,
        "identity": entry.owner.removeprefix("person:"),
        "text": entry.text,
        "created_at": entry.created_at,
        "used_at": entry.used_at,
        "uses": entry.uses,
    }


async def add(store: Any, config: Any, profile: str, text: str) -> str:
    """Save ``text`` for ``profile``; what to print."""
    from core.memory.scopes import profile_owner
    from core.store.memory import memory_store, normalised

    if profile not in config.profiles:
        known = ", ".join(sorted(config.profiles))
        raise MemoryProblem(f"no profile {profile!r} (configured: {known})")
    text, limit = normalised(text), config.memory.max_entry_chars
    if not text or len(text) > limit:
        raise MemoryProblem(f"an entry holds 1 to {limit} characters, this one {len(text)}")
    memory = memory_store(store)
    owner = profile_owner(profile)
    if await memory.count_memory(owner) >= config.memory.max_entries_per_scope:
        raise MemoryProblem(f"profile {profile} holds its maximum of entries; forget some first")
    saved = await memory.add_memory(owner, text)
    if saved is None:
        return f"already remembered for profile {profile}; not saved twice"
    return f"saved #{saved.id} for every session of profile {profile}"


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


def _fail(lines: list[str]) -> int:
    for line in lines:
        print(f"commonos: {line}", file=sys.stderr)
    return 1
