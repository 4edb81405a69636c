"""Live progress of a turn: one message, edited in place, listing the tools used so far.

A :class:`ProgressView` is fed by the engine's ``step_callback(iteration, prev_tools)``
(:meth:`ProgressView.step`, synchronous and cheap). One tracked flush task owns every
platform call:

* the first state is *sent*; later states *edit* that message;
* writes are paced to ``Capabilities.edit_interval``: a burst of steps in between
  coalesces, so only the latest state is written;
* ``NotModified`` counts as written; ``RateLimited`` waits ``retry_after`` and retries
  with the then-latest state (bounded attempts); any other failure is logged once and the
  view stops editing (the turn is never affected);
* :meth:`finish` writes the final state ("✅ Done — 3 steps") or deletes the message
  (``cleanup``), and waits for the task at most ``finish_timeout`` seconds (a rate-limited
  edit must not hold up the session's next turn) before cancelling it; :meth:`aclose`
  cancels it at once.

Modes: ``off`` (nothing), ``new`` (a line when the tool changes; repeats of one tool
counted on its line, ``💻 terminal: ls (×3)``, with the latest call's argument), ``all`` (a
line per call; identical consecutive lines collapse to ``×N``). Time is injected (``clock`` and
``sleep``) so tests run without waiting.

**Through the bot's pipeline** (:mod:`gateway.outbound.pipeline`): every write is a ``PROGRESS``
call (a :class:`~gateway.outbound.pipeline.Latest`) that reads the newest state when the budget
lets it *start*, so a stale state is never sent. While the turn runs the message carries
the turn's buttons (its Stop button), asked of ``buttons`` when the first state is written:
a quick answer that shows no progress makes none. The final state has none.

**Inside a streamed answer.** With ``shown_by`` (a native stream with
``Capabilities.stream_progress``: :mod:`gateway.turns.streaming`) the view sends no message: the
current step's line — or a slow model's notice, until its answer flows — is handed to the
stream, which shows it above the answer so far (docs/architecture.md §13).

**Becoming the reply.** :meth:`ProgressView.hand_over` stops the view and hands its message
to the reply sender, which edits it into the first chunk of the answer (one call instead of
"send the reply + delete the progress"). A queued write is dropped, one in flight is waited
for. :meth:`age` tells how long the view has existed: a turn that ran long ends with a new
message instead (an edit notifies nobody), and :meth:`finish` with ``remove=True`` then
deletes the progress message at ``CLEANUP`` priority, never waited for.

The engine's turn notices (``on_notice``, :class:`core.agent.step.ModelSlow`) are shown
whatever the mode, as one plain message of their own (:func:`notice_text`) written by a
tracked task, so the engine never waits for the chat: the first notice sends it, a later
one (the retry under way) edits it, and it is deleted when the answer comes — on
:class:`core.agent.step.ModelSlowEnded` (the stream flows again), at the next step, or
when the turn ends (:meth:`ProgressView.finish`), after the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from adapters.base import ButtonRows, ChatRef, NotModified, RateLimited, SentMessage
from adapters.calls import Delete, Edit, Priority, Send
from core.agent.step import ModelSlow, TurnNotice
from core.tasks import TaskSet
from core.types import TurnStatus
from gateway.outbound.pipeline import Latest, Outbound
from gateway.outbound.rate_limits import Sleep, with_rate_limits
from gateway.turns.previews import preview

logger = logging.getLogger(__name__)

ProgressMode = Literal["off", "new", "all"]
WRITE_ATTEMPTS = 8
FINISH_SECONDS = 10.0
"""How long :meth:`ProgressView.finish` waits for the final write before giving it up."""
MAX_LINES = 25
EMOJI = (
    (("terminal", "shell", "exec", "run", "command"), "💻"),
    (("read", "view", "cat", "list", "ls"), "📖"),
    (("write", "edit", "patch", "create"), "✏️"),
    (("search", "grep", "find"), "🔍"),
    (("web", "fetch", "http", "browse", "url"), "🌐"),
    (("clarify", "ask"), "❓"),
    (("delegate", "agent", "child"), "🤝"),
)
ENDINGS: dict[str, str] = {"completed": "✅ Done", "interrupted": "⏹ Stopped"}
NOTICE_ATTEMPTS = 3
"""Rate-limited sends of one notice before it is given up (logged)."""
WORKING = "⏳ Working…"
"""A running tool's line inside a stream where progress is off (``/progress off``)."""
WAITING_FOR = {"approval": "⚠️ Waiting for approval: {tool}", "choice": "❓ Waiting for your answer"}
"""The stream's line while a card waits for a person, by the request's kind."""


@dataclass(frozen=True, slots=True)
class ProgressConfig:
    mode: ProgressMode = "new"
    cleanup: bool = False
    """True: delete the progress message when the reply is sent; False: finalize it."""
    preview_length: int = 40
    """Characters of a tool's telling argument in its line; 0: the tool's name only."""
    becomes_reply: bool = True
    """Edit the progress message into the reply's first chunk (where edits exist)."""
    new_message_after: float = 10.0
    """A turn older than this ends with a new message (notifying the user); the progress
    message is then removed."""
    reactions: bool = False
    """Status reactions on the user's message: 👀 as its turn starts, ✅ / ❌ as it ends
    (:mod:`gateway.turns.reactions`)."""


@dataclass(slots=True)
class _Line:
    emoji: str
    name: str
    preview: str
    count: int = 1

    def text(self) -> str:
        head = f"{self.emoji} {self.name}" + (f": {self.preview}" if self.preview else "")
        return head + (f" (×{self.count})" if self.count > 1 else "")


DEFAULT_CONFIG = ProgressConfig()


def notice_text(notice: ModelSlow) -> str:
    """What the chat reads for a slow model: waiting, or retrying only when a retry is."""
    if notice.retrying:
        tries = f"attempt {notice.attempt} of {notice.max_attempts}"
        return f"⏳ The model did not answer; retrying ({tries})… Send /stop to give up."
    waited = f"{notice.waited:.0f} s" if notice.waited >= 1 else f"{notice.waited:.1f} s"
    return f"⏳ The model has not answered for {waited}; still waiting. Send /stop to give up."


def emoji_for(tool: str) -> str:
    lowered = tool.lower()
    for words, emoji in EMOJI:
        if any(word in lowered for word in words):
            return emoji
    return "⚙️"


class ProgressView:
    def __init__(
        self,
        outbound: Outbound,
        chat: ChatRef,
        config: ProgressConfig = DEFAULT_CONFIG,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        finish_timeout: float = FINISH_SECONDS,
        buttons: Callable[[], ButtonRows] | None = None,
        shown_by: Callable[[str], None] | None = None,
    ) -> None:
        self._outbound, self._chat, self._config = outbound, chat, config
        self._shown_by = shown_by
        """Set: the current step's line goes there (a streamed answer shows it) and the
        view sends no message."""
        self._make_buttons = buttons
        self._buttons: ButtonRows | None = None
        """The turn's own buttons, once made (at the first write)."""
        self._born = clock()
        self._in_flight = False
        self._writing: str | None = None
        """The state the write in flight makes (set when it starts)."""
        self._handed = False
        self._clock, self._sleep = clock, sleep
        self._finish_timeout = finish_timeout
        self._enabled = config.mode != "off" and outbound.capabilities.supports_edit
        self._lines: list[_Line] = []
        self._calls = 0
        self._wanted: str | None = None
        self._shown: str | None = None
        self._message: SentMessage | None = None
        self._last_write = float("-inf")
        self._wake = asyncio.Event()
        self._flush: TaskSet | None = None
        """The flush task's set, made at the first write (a view that shows nothing has none)."""
        self._notices: TaskSet | None = None
        """The notice writer's set, made at the first notice."""
        self._notice_wanted: str | None = None
        """The notice text to show; None: none (remove the one shown)."""
        self._notice_shown: str | None = None
        self._notice_message: SentMessage | None = None
        self._notice_writing = False
        self._running = ""
        """The line of the tool call running now (shown inside a stream)."""
        self._started = False
        self._closing = False
        self._delete = False
        self._broken = False

    @property
    def message(self) -> SentMessage | None:
        """The progress message once sent."""
        return self._message

    def age(self) -> float:
        """Seconds since the view was made (about the turn's age)."""
        return self._clock() - self._born

    # feeding ------------------------------------------------------------------------
    def step(self, iteration: int, prev_tools: list[dict[str, Any]]) -> None:
        """The engine's ``step_callback``: record the tools of the last step."""
        self._want_notice(None)  # a new model call: the last one's notice is stale
        if not self._enabled or self._closing or self._broken or not prev_tools:
            return
        for tool in prev_tools:
            self._add(str(tool.get("name", "?")), tool.get("arguments"))
        if self._shown_by is not None:
            self._shown_by(self._lines[-1].text())
            return
        self._want(self._render())

    def tool_started(self, name: str, arguments: object) -> None:
        """A tool call starts (``pre_tool_call``): a stream that shows the steps shows it
        running (the view itself sends nothing for it)."""
        if self._shown_by is None or self._closing:
            return
        off = self._config.mode == "off"
        self._running = WORKING if off else self._line(name, arguments).text()
        self._shown_by(self._running)

    def waiting_for_person(self, kind: str, tool: str) -> None:
        """A card asks a person (``kind`` ``approval`` or ``choice``) about ``tool``: the
        stream shows that it waits (drawn after the card, which dismissed a draft)."""
        if self._shown_by is not None and not self._closing:
            self._shown_by(WAITING_FOR.get(kind, WAITING_FOR["approval"]).format(tool=tool))

    def person_answered(self) -> None:
        """The card was answered: the stream shows the running tool again."""
        if self._shown_by is not None and not self._closing and self._running:
            self._shown_by(self._running)

    def _add(self, name: str, arguments: object) -> None:
        """One call: a new line, or a repeat counted on the last line (``new``: the same
        tool, showing the latest call's argument; ``all``: the same tool and argument)."""
        self._calls += 1
        last = self._lines[-1] if self._lines else None
        line = self._line(name, arguments)
        if last is not None and self._repeats(last, line):
            last.preview, last.count = line.preview, last.count + 1
            return
        self._lines.append(line)

    def _line(self, name: str, arguments: object) -> _Line:
        limit = self._config.preview_length  # 0: tool names only (``/verbose off``)
        return _Line(emoji_for(name), name, preview(arguments, limit) if limit > 0 else "")

    def _repeats(self, last: _Line, line: _Line) -> bool:
        """``line`` is counted on ``last`` (see :meth:`_add`)."""
        same_preview = self._config.mode == "new" or last.preview == line.preview
        return last.name == line.name and same_preview

    def _render(self, ending: str | None = None) -> str:
        shown = [line.text() for line in self._lines[-MAX_LINES:]]
        hidden = len(self._lines) - len(shown)
        head = [f"… {hidden} earlier"] if hidden else []
        tail = [ending] if ending else []
        return "\n".join(head + shown + tail)

    def _want(self, text: str) -> None:
        self._wanted = text
        if not self._started:
            self._started = True
            self._flush = TaskSet(logger)
            self._flush.spawn(self._flush_loop(), name=f"progress:{self._chat}")
        self._wake.set()

    def notice(self, notice: TurnNotice) -> None:
        """The engine's ``on_notice``: show, update or remove the notice message."""
        if self._closing:
            return
        if self._shown_by is not None:  # in the stream's status line, not a message
            step = self._lines[-1].text() if self._lines else ""
            self._shown_by(notice_text(notice) if isinstance(notice, ModelSlow) else step)
            return
        self._want_notice(notice_text(notice) if isinstance(notice, ModelSlow) else None)

    def _want_notice(self, text: str | None) -> None:
        self._notice_wanted = text
        if text != self._notice_shown and not self._notice_writing:
            self._notice_writing = True
            if self._notices is None:
                self._notices = TaskSet(logger)
            self._notices.spawn(self._write_notices(), name=f"notice:{self._chat}")

    async def _write_notices(self) -> None:
        """Until the notice shown is the one wanted: send, edit or delete it."""
        try:
            while (wanted := self._notice_wanted) != self._notice_shown:
                await self._write_notice(wanted)
                self._notice_shown = wanted
        except RateLimited:
            return  # logged by with_rate_limits
        except Exception:
            logger.warning("notice in %s not written", self._chat, exc_info=True)
        finally:
            self._notice_writing = False

    async def _write_notice(self, text: str | None) -> None:
        message = self._notice_message
        if text is None:
            if message is not None:
                self._notice_message = None
                await self._outbound.perform(Delete(message))
            return

        async def write() -> None:
            if message is None:
                send = Send(self._chat, text, markup=False, priority=Priority.URGENT)
                self._notice_message = await self._outbound.perform(send)
            else:
                with contextlib.suppress(NotModified):
                    edit = Edit(message, text, markup=False, priority=Priority.URGENT)
                    await self._outbound.perform(edit)

        await with_rate_limits(
            write, attempts=NOTICE_ATTEMPTS, sleep=self._sleep, chat=self._chat, what="notice"
        )

    async def _remove_notice(self) -> None:
        """The answer came: delete the notice (time-boxed by ``finish_timeout``)."""
        self._want_notice(None)
        if self._notices is not None:  # none: no notice was ever shown
            await self._notices.aclose(self._finish_timeout)

    # ending ---------------------------------------------------------------------------
    async def hand_over(self) -> SentMessage | None:
        """Stop the view and give its message to the reply (None: none was sent). A write
        still queued is dropped; one in flight is waited for (time-boxed)."""
        self._closing = self._handed = True  # the notice goes in finish(), after the reply
        if self._flush is not None:
            await self._flush.aclose(self._finish_timeout if self._in_flight else 0.0)
        return self._message

    async def finish(
        self, status: TurnStatus | None = "completed", *, remove: bool = False
    ) -> None:
        """The reply went out: write the final state (or delete), then wait (time-boxed)
        for the task; past ``finish_timeout`` the final state is given up (logged)."""
        self._closing = True
        await self._remove_notice()
        if self._handed:
            return
        flush = self._flush
        if flush is None:  # nothing was ever shown
            return
        if self._config.cleanup or remove:
            self._delete = True
        else:
            ending = ENDINGS.get(status or "", "⚠️ Ended")
            steps = f"{self._calls} step" + ("" if self._calls == 1 else "s")
            self._wanted = self._render(f"{ending} — {steps}")
        self._wake.set()
        if await flush.aclose(self._finish_timeout):
            logger.warning("progress in %s: final state not shown in time", self._chat)

    async def aclose(self) -> None:
        """Stop at once (shutdown): cancel the flush task and wait for it."""
        self._closing = True
        for tasks in (self._notices, self._flush):
            if tasks is not None:
                await tasks.aclose()

    # the flush task ---------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._handed:
                return
            if not self._delete:
                await self._pace()
            if self._delete:
                await self._remove()
                return
            await self._write_latest()
            if self._closing and not self._wake.is_set():
                return

    async def _pace(self) -> None:
        wait = self._last_write + self._outbound.capabilities.edit_interval - self._clock()
        if wait > 0:
            await self._sleep(wait)

    async def _write_latest(self) -> None:
        try:
            await with_rate_limits(
                self._scheduled_write,
                attempts=WRITE_ATTEMPTS,
                sleep=self._sleep,
                chat=self._chat,
                what="progress state",
            )
        except RateLimited:
            return  # logged by with_rate_limits
        except Exception:
            logger.warning("progress in %s: edit failed; stopped", self._chat, exc_info=True)
            self._broken = True

    async def _scheduled_write(self) -> None:
        """One ``PROGRESS`` write; what it writes is read when it starts (:meth:`_newest`)."""
        self._writing = None
        asked = self._write(self._wanted or "")
        try:
            with contextlib.suppress(NotModified):  # already shown: counts as written
                sent = await self._outbound.perform(Latest(asked, self._newest))
                if sent is not None:
                    self._message = sent
        finally:
            self._in_flight = False
        if self._writing is not None:
            self._shown, self._last_write = self._writing, self._clock()

    def _newest(self) -> Send | Edit | None:
        """The write to make now the budget let it start: the then-latest state, unless it
        is already shown or the view was handed over (None: nothing to write)."""
        text = self._wanted
        if self._broken or self._handed or text is None or text == self._shown:
            return None
        self._in_flight, self._writing = True, text
        return self._write(text)

    def _write(self, text: str) -> Send | Edit:
        """The first state is sent, later ones edit that message."""
        buttons = () if self._closing else self._running_buttons()
        if self._message is None:
            return Send(self._chat, text, buttons, markup=False, priority=Priority.PROGRESS)
        return Edit(self._message, text, buttons, markup=False, priority=Priority.PROGRESS)

    def _running_buttons(self) -> ButtonRows:
        """The turn's own buttons; else the ones the platform declares for progress."""
        if self._buttons is None and self._make_buttons is not None:
            self._buttons = self._make_buttons()
        if self._buttons:
            return self._buttons
        running = self._outbound.capabilities.progress_buttons
        return [list(running)] if running else []

    async def _remove(self) -> None:
        if self._message is None:
            return
        try:
            await self._outbound.perform(Delete(self._message))
        except Exception:
            logger.warning("progress in %s: delete failed", self._chat, exc_info=True)
