"""Per-chat settings: ``/model``, ``/busy``, ``/progress``, ``/verbose`` (README "Chat commands").

What a chat sets is stored per session key (``Store.put_session_settings``, a
:class:`~core.store.base.SessionSettings`: None for "the profile's own") and shown by
``/status``; it lasts across restarts and ``/new`` (it belongs to the chat, not to one
conversation). The service applies it:

* ``/model NAME`` — the session's model from its next model call
  (:class:`SessionSettingsBook.choose` is the agent's
  :data:`~core.agent.model_choice.ModelChooser` when presets are configured; with none the
  agents have no chooser: a model call asks nothing here), the preset's ``vision`` and ``stream``
  from the next turn; ``/model default`` returns to the profile's. ``/model`` lists the
  presets, the current one marked. A preset with ``owners_only`` is refused to non-owners.
* ``/busy queue|interrupt|steer`` — what a message does while a turn runs (the
  Dispatcher's policy, :meth:`SessionSettingsBook.busy`).
* ``/progress all|tools|off`` — the progress message: ``all`` a line per tool call
  (mode ``all``), ``tools`` a line each time the tool changes (mode ``new``: which tools
  ran, not every call), ``off`` none (the reply and notices still come).
* ``/verbose on|off`` — tool arguments in progress lines: ``on`` up to
  :data:`VERBOSE_PREVIEW` characters of the telling argument, ``off`` tool names only;
  unset: ``[progress]``'s short preview.

Each takes one argument; anything else gets one line saying what is accepted. The
settings of a session are read from the store once and kept in memory (at most
:data:`MAX_CACHED` sessions, least recently used evicted: read again when needed). The
busy policy is asked synchronously by the Dispatcher: a session's settings are loaded when
its turn starts, so the policy that matters — a message arriving while a turn runs — is
always known.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import TypedDict, Unpack, get_args

from adapters.base import InboundEvent
from core.agent.model_choice import ModelChoice
from core.agent.profile import BusyPolicy
from core.store.base import SessionSettings, Store
from gateway.control.commands import CommandHandler, Reply
from gateway.turns.presets import DEFAULT_NAME, ModelPresets
from gateway.turns.progress import ProgressConfig, ProgressMode

MAX_CACHED = 10_000
VERBOSE_PREVIEW = 200
"""``/verbose on``: characters of a tool's telling argument shown in its progress line."""

BUSY_POLICIES: tuple[BusyPolicy, ...] = get_args(BusyPolicy)
PROGRESS_MODES: dict[str, ProgressMode] = {"all": "all", "tools": "new", "off": "off"}
VERBOSE = {"on": True, "off": False}
CHILD_MARK = "/child:"

IsOwner = Callable[[InboundEvent], bool]


class SettingsChange(TypedDict, total=False):
    """The fields of :class:`SessionSettings` one command changes."""

    model: str | None
    busy: str | None
    progress: str | None
    verbose: bool | None


class SessionSettingsBook:
    """The settings of every session: the store's, kept in memory once read."""

    def __init__(self, store: Store, presets: ModelPresets, *, limit: int = MAX_CACHED) -> None:
        self.store, self.presets, self._limit = store, presets, limit
        self._known: OrderedDict[str, SessionSettings] = OrderedDict()

    async def load(self, key: str) -> SessionSettings:
        """``key``'s settings (a child agent's session has its parent's)."""
        key = key.split(CHILD_MARK, 1)[0]
        known = self._known.get(key)
        if known is None:
            known = await self.store.session_settings(key)
            self._keep(key, known)
        self._known.move_to_end(key)
        return known

    async def change(self, key: str, **changes: Unpack[SettingsChange]) -> SessionSettings:
        """Store ``changes`` (a ``SessionSettings`` field each; None: back to the
        profile's) for ``key``."""
        settings = replace(await self.load(key), **changes)
        await self.store.put_session_settings(key, settings)
        self._keep(key, settings)
        return settings

    def _keep(self, key: str, settings: SessionSettings) -> None:
        self._known[key] = settings
        while len(self._known) > self._limit:
            self._known.popitem(last=False)

    def forget(self, key: str) -> None:
        """Read ``key``'s settings from the store again when next needed: another process
        may have changed them (a cluster's session moved here, docs/cluster.md)."""
        self._known.pop(key, None)

    def cached(self, key: str) -> SessionSettings:
        """What is known of ``key`` without reading the store (all None when not loaded)."""
        return self._known.get(key) or SessionSettings()

    # applied by the service -------------------------------------------------------------
    async def choose(self, key: str) -> ModelChoice | None:
        """The agent's model chooser: the session's preset, None for the profile's."""
        name = (await self.load(key)).model
        preset = self.presets.get(name) if name is not None else None
        return preset.choice() if preset is not None else None

    def busy(self, key: str, profile_policy: BusyPolicy) -> BusyPolicy:
        chosen = self.cached(key).busy
        for policy in BUSY_POLICIES:
            if chosen == policy:
                return policy
        return profile_policy

    async def progress(self, key: str, config: ProgressConfig) -> ProgressConfig:
        """``config`` with the session's ``/progress`` mode and ``/verbose`` applied."""
        return progress_for(await self.load(key), config)


def progress_for(settings: SessionSettings, config: ProgressConfig) -> ProgressConfig:
    """``config`` with ``settings``' ``/progress`` mode and ``/verbose`` applied (a turn
    loads its session's settings once and passes them here)."""
    mode = PROGRESS_MODES.get(settings.progress or "", config.mode)
    length = config.preview_length
    if settings.verbose is not None:
        length = VERBOSE_PREVIEW if settings.verbose else 0
    return replace(config, mode=mode, preview_length=length)


class SettingsCommands:
    """The chat commands of per-chat settings, and their part of ``/status``."""

    def __init__(
        self, book: SessionSettingsBook, default_model: Callable[[str], str], is_owner: IsOwner
    ) -> None:
        self.book, self._default_model, self._is_owner = book, default_model, is_owner
        """``default_model(key)``: the model name of the key's profile."""

    def handlers(self) -> dict[str, CommandHandler]:
        return {
            "model": self.model,
            "busy": self.busy,
            "progress": self.progress,
            "verbose": self.verbose,
        }

    async def model(self, event: InboundEvent, key: str, args: str) -> Reply:
        current = (await self.book.load(key)).model
        if not args:
            return self._listing(current, self._default_model(key))
        name = args
        if name.lower() == DEFAULT_NAME:
            await self.book.change(key, model=None)
            default = self._default_model(key)
            return f"🧠 Model: back to the default ({default}) from the next model call."
        preset = self.book.presets.get(name)
        if preset is None:
            return f"Unknown model {name!r}. {self._valid()}"
        if preset.owners_only and not self._is_owner(event):
            return f"Only an owner may switch to {name!r}. {self._valid(owner=False)}"
        await self.book.change(key, model=name)
        return f"🧠 Model: {name} ({preset.model}) from the next model call."

    def _listing(self, current: str | None, default: str) -> str:
        presets = self.book.presets
        if not len(presets):
            return f"🧠 Model: {default}. No other models are configured."
        lines = ["🧠 Models (/model NAME to switch):"]
        lines.append(_line(DEFAULT_NAME, default, current is None))
        for preset in presets:
            lines.append(
                _line(preset.name, preset.model, current == preset.name, preset.owners_only)
            )
        if current is not None and presets.get(current) is None:
            lines.append(f"(chosen {current!r} is no longer configured: the default is used)")
        return "\n".join(lines)

    def _valid(self, owner: bool = True) -> str:
        names = [p.name for p in self.book.presets if owner or not p.owners_only]
        return "Valid: " + ", ".join([DEFAULT_NAME, *names]) + "."

    async def busy(self, event: InboundEvent, key: str, args: str) -> Reply:
        word = args.lower()
        if word not in BUSY_POLICIES:
            return _usage("busy", BUSY_POLICIES, (await self.book.load(key)).busy)
        await self.book.change(key, busy=word)
        return f"⏱ While I work, a new message will {_BUSY_WORDS[word]}."

    async def progress(self, event: InboundEvent, key: str, args: str) -> Reply:
        word = args.lower()
        if word not in PROGRESS_MODES:
            return _usage("progress", tuple(PROGRESS_MODES), (await self.book.load(key)).progress)
        await self.book.change(key, progress=word)
        return f"📊 Progress: {word} ({_PROGRESS_WORDS[word]}) from the next message."

    async def verbose(self, event: InboundEvent, key: str, args: str) -> Reply:
        word = args.lower()
        if word not in VERBOSE:
            now = (await self.book.load(key)).verbose
            return _usage("verbose", tuple(VERBOSE), None if now is None else _on_off(now))
        await self.book.change(key, verbose=VERBOSE[word])
        shown = "with their arguments" if VERBOSE[word] else "by name only"
        return f"🔎 Verbose {word}: progress shows tools {shown}."

    async def status(self, key: str) -> str | None:
        """``/status``'s part: the settings the chat made (None when it made none, so
        ``/status`` reads as it always did)."""
        settings = await self.book.load(key)
        model = self.book.presets.get(settings.model) if settings.model else None
        parts = []
        if settings.model is not None:
            shown = model.model if model is not None else "not configured: default used"
            parts.append(f"model {settings.model} ({shown})")
        if settings.busy is not None:
            parts.append(f"busy {settings.busy}")
        if settings.progress is not None:
            parts.append(f"progress {settings.progress}")
        if settings.verbose is not None:
            parts.append(f"verbose {_on_off(settings.verbose)}")
        return " · ".join(parts) or None


_BUSY_WORDS = {
    "queue": "wait its turn",
    "interrupt": "stop the running turn and run instead",
    "steer": "be added to the running turn",
}
_PROGRESS_WORDS = {
    "all": "a line per tool call",
    "tools": "a line each time the tool changes",
    "off": "no progress message",
}


def _line(name: str, model: str, current: bool, owners_only: bool = False) -> str:
    mark = "▶" if current else "•"
    only = " (owners only)" if owners_only else ""
    return f"{mark} {name} — {model}{only}"


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def _usage(command: str, accepted: tuple[str, ...], current: str | None) -> str:
    now = current or "default"
    return f"Use /{command} {' | '.join(accepted)} (now: {now})."
