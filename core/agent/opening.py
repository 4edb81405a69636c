"""Opening a turn: steps 2 and 3 of ``docs/turn-loop.md`` §2, with the replay of §15.

2. **History** — the open session (created if none), its active messages oldest first;
   the turn is started and the user message stored before the first model call. A
   replayed update (``UserMessage.origin`` already stored in the session, e.g. after a
   restart cut its turn short) reuses that stored message instead
   (``Store.find_message_by_origin``, asked only when an active message carries the
   origin; a session just created is not read, :mod:`core.agent.replay`): when its turn's
   answer is stored, that answer is the result — no turn is started and the model is not
   called;
   otherwise the turn resumes on that message, seeing the history up to it and what its own
   turn did, never later turns. Tool calls a crash left without a result get a placeholder
   saying what their record knows (:func:`core.agent.transcript.load_call_records`).
   The files the message came with become notes and image references of the stored
   message (:mod:`core.agent.attachment_content`), linked to their ``attachments`` rows;
   a message without files is stored as its text and never enters that module.
3. **System prompt** — stable + context (restored or rebuilt, :mod:`core.agent.prompt`;
   it names the session's workspace, :meth:`AgentProfile.session_workspace`, the directory
   the tools get as ``ToolContext.workspace``) as the system message; volatile (the clock's
   current time) as a note after this turn's user message, for the model only, so the
   bytes before the tools and the history never change with the clock.

:meth:`TurnOpener.open` does what must come before the turn's record exists and starts it
(from then on :class:`core.agent.loop.CommonAgent` records every failure);
:meth:`TurnOpener.prepare` does the rest, inside the recorded turn.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from core.agent.attachment_content import current_images, user_content
from core.agent.budget import IterationBudget, LoopGate
from core.agent.context import summary_first
from core.agent.control import TurnControl
from core.agent.profile import AgentProfile
from core.agent.prompt import (
    ContextSection,
    Runtime,
    SoulFile,
    clock_note,
    join_prefix,
    restore_or_build_prefix,
    system_prompt,
)
from core.agent.replay import redelivery, stored_answer
from core.agent.scope import TurnScope
from core.agent.steer import record_redirects
from core.agent.transcript import Transcript, load_call_records
from core.agent.turn import TurnResult, UserMessage
from core.model.base import ModelClient
from core.store.base import SessionRecord, Store, StoredMessage
from core.tools.base import QueueFile, ToolRegistry
from core.tools.sandbox import Workspaces
from core.types import ChatMessage, Content

# The turn's log: its records keep the name operators (and the replay tests) select it by.
logger = logging.getLogger(__name__)


@dataclass(slots=True)
class OpenTurn:
    """A turn after :meth:`TurnOpener.open`: session loaded, turn record started, history read.

    Storing the user message (the rest of step 2) and steps 3–4 come later, in
    :meth:`TurnOpener.prepare` and the agent's session hooks, where every failure or
    cancellation is recorded.
    """

    scope: TurnScope
    transcript: Transcript
    control: TurnControl
    budget: IterationBudget
    message: UserMessage
    session: SessionRecord
    is_new: bool
    workspace: Path
    """The session's workspace (:meth:`AgentProfile.session_workspace`), named once per turn:
    the system prompt, the user's files and the tools' ``ToolContext.workspace`` read it."""
    gate: LoopGate | None = None
    session_started: bool = False
    """``on_session_start`` was fired (it fires once, in the new session's first turn)."""
    replayed: StoredMessage | None = None
    """The stored user message of a replayed update, when the turn resumes on it."""
    on_file: QueueFile | None = None
    """Where ``send_file`` hands its files (``ToolContext.queue_file``; child turns too)."""


@dataclass(slots=True)
class Opening:
    """How far opening a turn got: its scope once the turn record is started."""

    scope: TurnScope | None = None
    is_new: bool = False
    """The session is new: a turn ended while opening still fires ``on_session_start``."""


@dataclass(frozen=True, slots=True)
class TurnOpener:
    """Steps 2–3 for one agent, with the parts of it they read."""

    store: Store
    model: ModelClient
    tools: ToolRegistry
    profile: AgentProfile
    soul: SoulFile
    clock: Callable[[], float]
    workspaces: Workspaces
    """Where the profile's sessions work (:meth:`AgentProfile.workspaces`), built once per
    agent: each turn names its session's workspace from it."""
    context_section: ContextSection | None = None
    """More of the context tier (memory), built with the prefix and frozen with it."""

    async def open(
        self,
        key: str,
        message: UserMessage,
        control: TurnControl,
        budget: IterationBudget,
        opening: Opening,
    ) -> OpenTurn | TurnResult:
        """Session, history and a started turn; from here on every failure is recorded.

        A replayed update whose answer is stored gets that answer back instead (a
        :class:`TurnResult`, no turn started)."""
        session, history, is_new = await self._session(key)
        replayed = await self._replayed(session.id, message.origins, history) if history else None
        if replayed is not None:
            answer = stored_answer(history, replayed.id)
            if answer is not None:
                logger.info(
                    "replaying update %s: its answer is stored (turn %s); delivered again,"
                    " no model call",
                    message.origin,
                    answer.turn_id,
                )
                return await redelivery(self.store, answer)
        calls = await load_call_records(self.store, history) if history else {}
        scope = TurnScope(key, session.id, uuid.uuid4().hex, message.sender_id)
        is_new = is_new or await self._never_started(session.id, history)
        opening.scope, opening.is_new = scope, is_new  # a written record is ended, hooks too
        await self.store.start_turn(scope.session_id, scope.turn_id)
        control.turn_id = scope.turn_id
        transcript = Transcript("", history, calls)
        workspace = self.workspaces.path_for(key)  # AgentProfile.session_workspace
        opened = OpenTurn(scope, transcript, control, budget, message, session, is_new, workspace)
        opened.replayed = replayed
        return opened

    async def prepare(self, turn: OpenTurn) -> None:
        """Store the user message (or resume on the replayed one), read its images, record
        a redirect that came meanwhile, build the system prompt."""
        if not self._resume_replayed(turn):
            await self._store_user_message(turn)
        user = turn.transcript.user_entry.message
        if isinstance(user.content, list):  # only a message with files has image parts
            turn.transcript.images = await current_images(
                user.content, turn.workspace, self.profile.vision
            )
        if turn.control.unrecorded:  # a /redirect came while the turn opened
            await record_redirects(turn.control, turn.transcript, self.store)
        await self._system_prompt(turn)

    async def _session(self, key: str) -> tuple[SessionRecord, list[StoredMessage], bool]:
        """The open session with its active messages, summary first, read together;
        else a new session (no history to read) — and whether it is new."""
        found = await self.store.load_active_session(key)
        if found is not None:
            return found.session, summary_first(found.messages), False
        return await self.store.create_session(key, self.profile.name), [], True

    async def _never_started(self, session_id: str, history: list[StoredMessage]) -> bool:
        """No turn of the session ever reached the store, so ``on_session_start`` never
        fired for it (it fires in the first turn whose record was written, whatever that
        turn's fate): the persisted marker is the session's first turn record. A session with
        history had one; only an empty one asks the store."""
        return not history and not await self.store.list_turns(session_id)

    async def _replayed(
        self, session_id: str, origins: tuple[str, ...], history: list[StoredMessage]
    ) -> StoredMessage | None:
        """The active stored user message of a replayed update (one of ``origins``; several
        when messages were merged into one turn), if any."""
        for origin in origins:
            if not _carried(history, origin):
                continue  # the store's earliest message with it, if any, is not active
            stored = await self.store.find_message_by_origin(session_id, origin)
            if stored is None or stored.message.role != "user":
                continue
            if any(m.id == stored.id for m in history):
                return stored
        return None  # none stored, or compacted away since: stored afresh

    def _resume_replayed(self, turn: OpenTurn) -> bool:
        """A replayed update (same origin) reuses the user message stored the first time:
        the model sees it once, with the history up to it (never later turns), and a
        redirect still updates that stored message."""
        stored = turn.replayed
        if stored is None or turn.transcript.resume_at(stored.id) is None:
            return False
        logger.info(
            "replaying update %s: reusing stored message %d", turn.message.origin, stored.id
        )
        return True

    async def _store_user_message(self, turn: OpenTurn) -> None:
        scope, message = turn.scope, turn.message
        content: Content = message.text
        if message.attachments:
            content = await user_content(message, turn.workspace, self.profile)
        user = ChatMessage(role="user", content=content)
        user_id = await self.store.append_message(
            scope.session_id, scope.turn_id, user, origin=message.origin, also=message.also
        )
        if message.attachments and message.origin is not None:  # rows name their message
            await self.store.link_attachments(message.origin, user_id)
        turn.transcript.add(user, user_id)

    async def _system_prompt(self, turn: OpenTurn) -> None:
        """The cached prefix as the system message; the volatile tier as the clock note on
        this turn's user message — in the system message only for the external runtime
        (``docs/turn-loop.md`` §2 step 3)."""
        session, transcript, speaker = turn.session, turn.transcript, turn.scope.requested_by
        profile = self.profile
        tools = tuple(self.tools.names())
        soul = self.soul.current()
        if profile.skills_index:  # the stable tier: SOUL.md, then the skills' names
            soul = join_prefix(soul, profile.skills_index)
        runtime = Runtime(self.model.model, tools, soul, profile.name, str(turn.workspace))
        add = self.context_section
        section = partial(add, session, speaker) if add is not None else None
        prefix = await restore_or_build_prefix(self.store, session, profile, runtime, section)
        now = self.clock()
        if profile.external_runtime:
            transcript.system_prompt = system_prompt(prefix, now)
        else:
            transcript.system_prompt, transcript.volatile_note = prefix, clock_note(now)


def _carried(history: list[StoredMessage], origin: str) -> bool:
    """A message of ``history`` was stored with ``origin``, alone or as one line of several
    (the match of ``Store.find_message_by_origin``, made on the messages already read)."""
    line = f"\n{origin}\n"
    return any(line in f"\n{m.origin}\n" for m in history if m.origin is not None)
