"""The system prompt in three tiers, and the restore-or-build check.

``docs/turn-loop.md`` §2, step 3:

* **stable** — the profile's SOUL.md text;
* **context** — built once per session and frozen: the session key, profile, the
  session's workspace (the directory its tools work in, not the profile's root when each
  session has its own), tool names and the session's start date. Stored with the session;
* **volatile** — the current time, rebuilt every turn. It is *not* in the system message:
  a chat template renders the tools block after the system text (Qwen/Hermes-style
  templates, llama-server), so a clock there changes the bytes before the tools and the
  whole history once a minute and the server's prompt cache misses. It rides as a short
  note, :func:`clock_note`, at the end of this turn's user message, for the model only and
  never stored (:func:`user_for_model`) — ``docs/turn-loop.md`` §2 step 3, "Cache-safe
  prompts". The external runtime, which builds its own prompt, still gets it as the last
  paragraph of the system message (:func:`system_prompt`).

The stable+context *prefix* is stored on the session (``Store.save_session_prompt``) with a
fingerprint of the runtime it was built for: the model name, the enabled tool names, a
hash of SOUL.md, and the profile name and session workspace (both appear in the context
tier).
On every turn :func:`restore_or_build_prefix` reuses the stored prefix
byte-for-byte when the fingerprint still matches (so the provider's prompt cache keeps
hitting), and rebuilds and re-stores it when the runtime changed (model switched, toolset
changed, SOUL.md edited — re-read each turn when its mtime changed, :class:`SoulFile`) —
a stale prompt would describe tools the agent no longer has.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.agent.profile import AgentProfile
from core.store.base import SessionRecord, Store

logger = logging.getLogger(__name__)

ContextSection = Callable[[SessionRecord, str | None], Awaitable[str]]
"""An extra part of the context tier (the session's memory, :mod:`core.memory`): called
with the session and the speaker only when the prefix is built, so it is frozen with it;
``""`` adds nothing."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the cached prefix depends on."""

    model: str
    tool_names: tuple[str, ...]
    soul: str
    profile: str = ""
    workspace: str = ""
    """The session's workspace (:meth:`AgentProfile.session_workspace`)."""

    def fingerprint(self) -> str:
        soul_hash = hashlib.sha256(self.soul.encode()).hexdigest()
        payload = {
            "model": self.model,
            "tools": sorted(self.tool_names),
            "soul": soul_hash,
            "profile": self.profile,
            "workspace": self.workspace,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def build_context_tier(
    session: SessionRecord, profile: AgentProfile, runtime: Runtime, extra: str = ""
) -> str:
    """The context tier; its workspace is the session's (``runtime.workspace``), where the
    terminal and the file tools work (:meth:`AgentProfile.session_workspace`); ``extra``
    (a :data:`ContextSection`'s text) follows as its own paragraph."""
    started = datetime.fromtimestamp(session.created_at, tz=UTC).strftime("%Y-%m-%d")
    tier = "\n".join(
        [
            "## Session",
            f"Session: {session.key}",
            f"Profile: {profile.name}",
            f"Workspace: {runtime.workspace}",
            f"Tools: {', '.join(sorted(runtime.tool_names)) or '(none)'}",
            f"Session started: {started}",
        ]
    )
    return f"{tier}\n\n{extra}" if extra else tier


def join_prefix(stable: str, context: str) -> str:
    return f"{stable.rstrip()}\n\n{context}"


VOLATILE_TIER = "Current time: %A %Y-%m-%d %H:%M UTC"
"""The volatile tier, a ``strftime`` format of the clock's time in UTC."""


def clock_note(now: float) -> str:
    """The volatile tier as the note at the end of this turn's user message."""
    return datetime.fromtimestamp(now, tz=UTC).strftime(f"[{VOLATILE_TIER}]")


def user_for_model(text: str, context: str, note: str) -> str:
    """This turn's user message as the model sees it: the ``pre_llm_call`` context in
    front, the volatile note (:func:`clock_note`) after; neither is stored."""
    return "\n\n".join(filter(None, (context, text, note)))


def system_prompt(prefix: str, now: float) -> str:
    """The cached prefix with the volatile tier as its last paragraph — only for the
    external runtime, which renders its own prompt (``docs/turn-loop.md`` §14)."""
    return f"{prefix}\n\n{datetime.fromtimestamp(now, tz=UTC).strftime(VOLATILE_TIER)}"


async def restore_or_build_prefix(
    store: Store,
    session: SessionRecord,
    profile: AgentProfile,
    runtime: Runtime,
    section: Callable[[], Awaitable[str]] | None = None,
) -> str:
    """The stable+context prefix: restored byte-identical, or rebuilt when the runtime
    changed (``section`` asked then, and only then)."""
    stored = session.system_prompt
    if stored is not None and session.prompt_fingerprint == runtime.fingerprint():
        return stored  # nothing the prefix depends on changed: byte for byte
    extra = await section() if section is not None else ""
    context = build_context_tier(session, profile, runtime, extra)
    prefix = join_prefix(runtime.soul, context)
    await store.save_session_prompt(
        session.id, frozen_context=context, system_prompt=prefix, fingerprint=runtime.fingerprint()
    )
    return prefix


class SoulFile:
    """The stable tier's text, re-read from SOUL.md when the file changed.

    Each turn calls :meth:`current`: when the profile has a ``soul_path`` whose mtime
    differs from the one last read, the file is read again, so the restore-or-build check
    sees an edit without a restart. A file that cannot be read keeps the text loaded
    before (logged), so a half-saved or vanished SOUL.md never breaks a turn.
    """

    def __init__(self, text: str, path: Path | None) -> None:
        self._text = text
        self._path = path
        self._mtime = _mtime(path) if path is not None else None

    def current(self) -> str:
        if self._path is None:
            return self._text
        mtime = _mtime(self._path)
        if mtime is not None and mtime != self._mtime:
            try:
                self._text = self._path.read_text(encoding="utf-8")
                self._mtime = mtime
            except (OSError, UnicodeError) as error:
                logger.warning("SOUL.md %s not re-read: %s", self._path, error)
        return self._text


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
