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

Modes: ``off`` (nothing), ``new`` (a line when the tool changes), ``all`` (a line per
call; identical consecutive lines collapse to ``×N``). Time is injected (``clock`` and
``sleep``) so tests run without waiting.

The engine's turn notices (``on_notice``, e.g. :class:`core.agent.step.ModelSlow`) are
shown whatever the mode: :meth:`ProgressView.notice` sends each as its own plain message
(:func:`notice_text`) from a tracked task, so the engine never waits for the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from adapters.base import Adapter, ChatRef, NotModified, RateLimited, SentMessage
from core.agent.step import ModelSlow, TurnNotice
from core.tasks import TaskSet
from core.types import TurnStatus
from gateway.rate_limits import Sleep, with_rate_limits
from gateway.redact import preview

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


@dataclass(frozen=True, slots=True)
class ProgressConfig:
    mode: ProgressMode = "new"
    cleanup: bool = False
    """True: delete the progress message when the reply is sent; False: finalize it."""
    preview_length: int = 40


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


def notice_text(notice: TurnNotice) -> str:
    """What the chat reads for a turn notice."""
    if isinstance(notice, ModelSlow):
        if notice.max_attempts <= 1:
            return "⏳ The model is not answering yet; still waiting. Send /stop to give up."
        tries = f"attempt {notice.attempt} of {notice.max_attempts}"
        return f"⏳ The model is not answering, retrying… ({tries}). Send /stop to give up."
    return "⏳ Still working…"


def emoji_for(tool: str) -> str:
    lowered = tool.lower()
    for words, emoji in EMOJI:
        if any(word in lowered for word in words):
            return emoji
    return "⚙️"


class ProgressView:
    def __init__(
        self,
        adapter: Adapter,
        chat: ChatRef,
        config: ProgressConfig = DEFAULT_CONFIG,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        finish_timeout: float = FINISH_SECONDS,
    ) -> None:
        self._adapter, self._chat, self._config = adapter, chat, config
        self._clock, self._sleep = clock, sleep
        self._finish_timeout = finish_timeout
        self._enabled = config.mode != "off" and adapter.capabilities.supports_edit
        self._lines: list[_Line] = []
        self._calls = 0
        self._wanted: str | None = None
        self._shown: str | None = None
        self._message: SentMessage | None = None
        self._last_write = float("-inf")
        self._wake = asyncio.Event()
        self._flush = TaskSet(logger)
        self._notices = TaskSet(logger)
        self._started = False
        self._closing = False
        self._delete = False
        self._broken = False

    @property
    def message(self) -> SentMessage | None:
        """The progress message once sent."""
        return self._message

    # feeding ------------------------------------------------------------------------
    def step(self, iteration: int, prev_tools: list[dict[str, Any]]) -> None:
        """The engine's ``step_callback``: record the tools of the last step."""
        if not self._enabled or self._closing or self._broken or not prev_tools:
            return
        for tool in prev_tools:
            self._add(str(tool.get("name", "?")), tool.get("arguments"))
        self._want(self._render())

    def _add(self, name: str, arguments: object) -> None:
        self._calls += 1
        last = self._lines[-1] if self._lines else None
        if self._config.mode == "new" and last is not None and last.name == name:
            return
        line = _Line(emoji_for(name), name, preview(arguments, self._config.preview_length))
        if last is not None and (last.name, last.preview) == (line.name, line.preview):
            last.count += 1
            return
        self._lines.append(line)

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
            self._flush.spawn(self._flush_loop(), name=f"progress:{self._chat}")
        self._wake.set()

    def notice(self, notice: TurnNotice) -> None:
        """The engine's ``on_notice``: send the notice as a plain message of its own."""
        if self._closing:
            return
        self._notices.spawn(self._send_notice(notice_text(notice)), name=f"notice:{self._chat}")

    async def _send_notice(self, text: str) -> None:
        async def send() -> None:
            await self._adapter.send(self._chat, text, markup=False)

        try:
            await with_rate_limits(
                send, attempts=NOTICE_ATTEMPTS, sleep=self._sleep, chat=self._chat, what="notice"
            )
        except RateLimited:
            return  # logged by with_rate_limits
        except Exception:
            logger.warning("notice in %s not sent", self._chat, exc_info=True)

    # ending ---------------------------------------------------------------------------
    async def finish(self, status: TurnStatus | None = "completed") -> None:
        """The reply went out: write the final state (or delete), then wait (time-boxed)
        for the task; past ``finish_timeout`` the final state is given up (logged)."""
        self._closing = True
        await self._notices.aclose(self._finish_timeout)
        if not self._started:
            return
        if self._config.cleanup:
            self._delete = True
        else:
            ending = ENDINGS.get(status or "", "⚠️ Ended")
            steps = f"{self._calls} step" + ("" if self._calls == 1 else "s")
            self._wanted = self._render(f"{ending} — {steps}")
        self._wake.set()
        if await self._flush.aclose(self._finish_timeout):
            logger.warning("progress in %s: final state not shown in time", self._chat)

    async def aclose(self) -> None:
        """Stop at once (shutdown): cancel the flush task and wait for it."""
        self._closing = True
        await self._notices.aclose()
        await self._flush.aclose()

    # the flush task ---------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._delete:
                await self._pace()
            if self._delete:
                await self._remove()
                return
            await self._write_latest()
            if self._closing and not self._wake.is_set():
                return

    async def _pace(self) -> None:
        wait = self._last_write + self._adapter.capabilities.edit_interval - self._clock()
        if wait > 0:
            await self._sleep(wait)

    async def _write_latest(self) -> None:
        try:
            await with_rate_limits(
                self._write_wanted,
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

    async def _write_wanted(self) -> None:
        """Write the then-latest state, unless it is already shown."""
        text = self._wanted
        if self._broken or text is None or text == self._shown:
            return
        with contextlib.suppress(NotModified):  # already shown: counts as written
            await self._write(text)
        self._shown, self._last_write = text, self._clock()

    async def _write(self, text: str) -> None:
        running = self._adapter.capabilities.progress_buttons
        buttons = [list(running)] if running and not self._closing else []
        if self._message is None:
            self._message = await self._adapter.send(self._chat, text, buttons=buttons, markup=False)
        else:
            await self._adapter.edit(self._message, text, buttons=buttons, markup=False)

    async def _remove(self) -> None:
        if self._message is None:
            return
        try:
            await self._adapter.delete(self._message)
        except Exception:
            logger.warning("progress in %s: delete failed", self._chat, exc_info=True)
