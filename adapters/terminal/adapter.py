"""The terminal chat adapter: one local session in the terminal that runs ``commonos chat``.

The person at the keyboard is ``settings.user`` (``terminal:<user>`` for approvals and
allowlists); their one session's key is ``terminal:dm:<user>``. Lines typed are events:

* ``/name args`` — a chat command (``/stop``, ``/steer ...``, ``/status``, ``/new``, ...),
  handled by the router like any platform's; ``/exit`` and ``/quit`` end the chat here;
* ``/attach PATH [text]`` — a message (``text``, may be empty) with the file at ``PATH``
  (``~`` expanded, relative to the current directory; quote a path with spaces) as its
  offered attachment, ``source`` its resolved absolute path; the gateway copies it into
  the session's workspace (:meth:`TerminalAdapter.download` reads it in chunks). A path
  that is missing, not a regular file or unreadable gets one line and nothing is sent;
* while a message with buttons is open (an approval card, a ``clarify`` question), a line
  that is one of its keys presses that button (``y``/``n``/``a`` on an approval card, the
  number of a choice; see :mod:`adapters.terminal.answers`);
* anything else — a message to the agent.

:meth:`TerminalAdapter.interrupt` is Ctrl-C (the caller installs it as the SIGINT
handler): the first stops the running turn exactly as ``/stop`` does; a second within
``settings.exit_window`` seconds, with no line typed in between, ends the chat
(:attr:`TerminalAdapter.closed` is set), as does end of input (Ctrl-D).

Outbound text is plain (``markup="plain"``: replies are rendered by the ``PLAIN``
renderer). An edit prints what is new: the added tail when the new text extends the old
(a progress line, a card's outcome), else the whole new text. On a terminal
(:mod:`adapters.terminal.screen`) the answer's text shows as the model writes it
(``live_text``: ``LiveText`` calls), the rendered answer then taking its place, and a
delete erases the message while it is still on the screen (the ⏳ notice of a slow model
once the answer comes); without one (output to a file or pipe) a delete prints nothing.
A file the agent sends (``SendFile``) is already on this machine: its line names it, its
size and where it is (``📎 report.pdf (12.3 KB) saved at /abs/path``). Input is read from
``settings.input_fd`` with the event loop's reader, so the descriptor's flags are never
changed.

Health (``adapter.health``, docs/architecture.md §10): ``up`` from ``start`` to ``stop``
(``stopped`` after); a terminal has no connection to lose.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import mimetypes
import os
import secrets
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from adapters.base import (
    ButtonRows,
    Capabilities,
    ChatRef,
    DownloadFailed,
    EventKind,
    EventSink,
    InboundEvent,
    MessageGone,
    NotModified,
    Sender,
    SentMessage,
    SessionKey,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.health import Health
from adapters.offered import display_name, kind_of, shown_size
from adapters.terminal.answers import Answer, answers_for, pressed, prompt_line
from adapters.terminal.screen import Screen
from core.attachments import Attachment, OutgoingFile
from core.bounded import BoundedMap
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

PLATFORM = "terminal"
EXIT_WINDOW = 2.0
"""Seconds within which a second Ctrl-C ends the chat."""
EXIT_COMMANDS = frozenset({"exit", "quit"})
REMEMBERED_MESSAGES = 1000
READ_SIZE = 65536
ATTACH = "attach"
ATTACH_HELP = "/attach PATH [text] — send a file with a message (terminal chat)"
UPLOAD_LIMIT = 1024**4
"""A sent file is only named (it is on this machine already): no real limit."""
BANNER = (
    "commonos chat — session {key}. Type a message and press Enter; /help lists the "
    "commands. Ctrl-C stops the running turn; Ctrl-C twice (or Ctrl-D, /exit) quits."
)
INTERRUPTED = "^C — stopping the running turn (Ctrl-C again within {window:g}s quits)"


@dataclass(frozen=True, slots=True)
class TerminalSettings:
    user: str = "local"
    """Who is at the keyboard; also the session's chat id (see :func:`local_user`)."""
    input_fd: int = 0
    exit_window: float = EXIT_WINDOW


def local_user(name: str) -> str:
    """``name`` made fit for a session key (no ``:`` or ``/``, not empty)."""
    cleaned = "".join("_" if c in ":/" or c.isspace() else c for c in name.strip())
    return cleaned or "local"


def capabilities() -> Capabilities:
    return Capabilities(
        max_text_length=100_000,
        length_unit="codepoints",
        supports_edit=True,
        button_payload_limit=1024,
        edit_interval=0.0,
        markup="plain",
        upload_limit=UPLOAD_LIMIT,
        live_text=True,
    )


def parse_command(text: str) -> tuple[str, str] | None:
    """``"/steer go left"`` → ``("steer", "go left")``; None when not a command."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name = head.lower()
    return (name, args.strip()) if name.isascii() and name.replace("_", "").isalnum() else None


class TerminalAdapter:
    """The :class:`adapters.base.Adapter` for one person at a terminal."""

    platform = PLATFORM

    def __init__(
        self,
        settings: TerminalSettings | None = None,
        *,
        output: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or TerminalSettings()
        self.capabilities = capabilities()
        self.closed = asyncio.Event()
        """Set when the person quits (Ctrl-C twice, Ctrl-D, ``/exit``)."""
        self._output = output
        self._screen = Screen(output or sys.stdout)
        self._clock = clock
        user = self.settings.user
        self.session_key = SessionKey(PLATFORM, "dm", user)
        self.chat = ChatRef(PLATFORM, user)
        self.sender = Sender(id=user, name=user)
        self._sink: EventSink | None = None
        self._lines: asyncio.Queue[str] = asyncio.Queue()
        self._pending = b""
        self._tasks = TaskSet(_log)
        self._run = secrets.token_hex(4)
        self._updates = itertools.count(1)
        self._ids = itertools.count(1)
        self._shown: BoundedMap[str, str] = BoundedMap(REMEMBERED_MESSAGES)
        self._prompts: BoundedMap[str, tuple[Answer, ...]] = BoundedMap(REMEMBERED_MESSAGES)
        self._last_interrupt: float | None = None
        self.health = Health("starting", time.time())

    # lifecycle -----------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Greet, then read lines and deliver them to ``sink``, one at a time, in order."""
        self._sink = sink
        self.health = Health("up", time.time())
        asyncio.get_running_loop().add_reader(self.settings.input_fd, self._readable)
        self._tasks.spawn(self._deliver_lines(), name="terminal:lines")
        self._print(BANNER.format(key=self.session_key))

    async def stop(self) -> None:
        self._sink = None
        asyncio.get_running_loop().remove_reader(self.settings.input_fd)
        await self._tasks.aclose()
        self.closed.set()
        self.health = Health("stopped", time.time())

    def close(self) -> None:
        """End the chat (the caller waits for :attr:`closed`, then stops the gateway)."""
        self.closed.set()

    def interrupt(self) -> None:
        """Ctrl-C: stop the running turn as ``/stop`` does; twice in a short while, quit."""
        now = self._clock()
        last, self._last_interrupt = self._last_interrupt, now
        if last is not None and now - last <= self.settings.exit_window:
            self.close()
            return
        if self._sink is None:  # not chatting yet: nothing to stop
            self.close()
            return
        self._print(INTERRUPTED.format(window=self.settings.exit_window))
        event = self._event("command", "/stop", command="stop")
        self._tasks.spawn(self._deliver(event), name="terminal:interrupt")

    # inbound ------------------------------------------------------------------------
    def _readable(self) -> None:
        try:
            data = os.read(self.settings.input_fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # end of input (Ctrl-D, a closed terminal)
            asyncio.get_running_loop().remove_reader(self.settings.input_fd)
            self.close()
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        if lines:  # a line typed in between: the next Ctrl-C is a first one again
            self._last_interrupt = None
            self._screen.typed()
        for line in lines:
            self._lines.put_nowait(line.decode("utf-8", errors="replace"))

    async def _deliver_lines(self) -> None:
        while True:
            line = await self._lines.get()
            event = self.event_for(line)
            if event is not None:
                await self._deliver(event)

    def event_for(self, line: str) -> InboundEvent | None:
        """What a typed line is: a command, a button press, a message; None for nothing."""
        text = line.strip()
        if not text:
            return None
        command = parse_command(text)
        if command is not None and command[0] in EXIT_COMMANDS:
            self.close()
            return None
        if command is not None and command[0] == ATTACH:
            return self._attach(command[1])
        if command is not None and command[0] == "help":
            self._print(ATTACH_HELP)
        if command is not None:
            return self._event("command", text, command=command[0], args=command[1])
        press = self._press(text)
        return press if press is not None else self._event("text", text)

    def _attach(self, args: str) -> InboundEvent | None:
        """``/attach PATH [text]``: a message with the file, or one line saying why not."""
        try:
            path, text = _path_and_text(args)
            attachment = offered_file(path)
        except ValueError as exc:
            self._print(f"/attach: {exc}")
            return None
        return replace(self._event("text", text), attachments=(attachment,))

    async def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The attached local file's bytes, :data:`READ_SIZE` at a time."""
        try:
            file = await asyncio.to_thread(open, attachment.source, "rb")
            with file:
                while chunk := await asyncio.to_thread(file.read, READ_SIZE):
                    yield chunk
        except OSError as exc:
            raise DownloadFailed(f"{attachment.name}: cannot be read ({exc.strerror})") from None

    def _press(self, text: str) -> InboundEvent | None:
        """A press of the button ``text`` answers on the newest open prompt that has it."""
        found = next(
            (
                (message_id, button)
                for message_id, answers in reversed(self._prompts.items())
                if (button := pressed(answers, text)) is not None
            ),
            None,
        )
        if found is None:
            return None
        message_id, button = found
        event = self._event("button", text)
        return replace(
            event,
            button_data=button.data,
            message=SentMessage(self.chat, message_id),
            press_id=event.update_id,
        )

    def _event(
        self, kind: EventKind, text: str, *, command: str | None = None, args: str = ""
    ) -> InboundEvent:
        return InboundEvent(
            kind=kind,
            platform=PLATFORM,
            update_id=f"{self._run}-{next(self._updates)}",
            chat=self.chat,
            chat_type="dm",
            sender=self.sender,
            session_key=self.session_key,
            text=text,
            command=command,
            args=args,
        )

    async def _deliver(self, event: InboundEvent) -> None:
        sink = self._sink
        if sink is None:
            return
        try:
            await sink(event)
        except Exception:
            _log.exception("terminal event %s could not be delivered", event.update_id)

    # outbound -----------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`); typing shows nothing here."""
        match call:
            case Send(chat, text, buttons):
                return self._send(chat, text, buttons)
            case SendFile(chat, file, caption):
                return self._send_file(chat, file, caption)
            case Edit(message, text, buttons):
                self._edit(message, text, buttons)
            case Delete(message):
                self._delete(message)
            case AnswerPress(_, text) if text:
                self._print(text)
            case LiveText(_, text, mode):
                self._screen.live(text, mode)
            case AnswerPress() | Typing() | React():
                pass  # nothing to show
        return None

    def _send(self, chat: ChatRef, text: str, buttons: ButtonRows) -> SentMessage:
        message_id = str(next(self._ids))
        self._shown.put(message_id, text)
        self._screen.print(text, key=message_id)
        self._open_prompt(message_id, buttons)
        return SentMessage(chat, message_id)

    def _send_file(self, chat: ChatRef, file: OutgoingFile, caption: str) -> SentMessage:
        message_id = str(next(self._ids))
        line = f"📎 {file.name} ({shown_size(file.size)}) saved at {file.path}"
        self._print(f"{caption}\n{line}" if caption else line)
        return SentMessage(chat, message_id)

    def _edit(self, message: SentMessage, text: str, buttons: ButtonRows) -> None:
        old = self._shown.get(message.message_id)
        if old is None:
            raise MessageGone(f"terminal message {message.message_id} is gone")
        self._prompts.pop(message.message_id, None)
        if text == old and not buttons:
            raise NotModified("the same text")
        self._shown.put(message.message_id, text)
        new = text[len(old) :].lstrip("\n") if text.startswith(old) else text
        if new:
            self._print(new)
        self._open_prompt(message.message_id, buttons)

    def _delete(self, message: SentMessage) -> None:
        if self._shown.pop(message.message_id, None) is None:
            raise MessageGone(f"terminal message {message.message_id} is gone")
        self._prompts.pop(message.message_id, None)
        self._screen.remove(message.message_id)

    def _open_prompt(self, message_id: str, buttons: ButtonRows) -> None:
        answers = answers_for(buttons)
        if not answers:
            return
        self._prompts.put(message_id, answers)
        self._print(prompt_line(answers) + "   (type the key and press Enter)")

    def _print(self, text: str) -> None:
        self._screen.print(text)


def _path_and_text(args: str) -> tuple[str, str]:
    """``PATH [text]``: the first word (or a quoted path, for one with spaces), the rest."""
    if not args:
        raise ValueError("which file? /attach PATH [text]")
    quote = args[0]
    if quote in "'\"":
        end = args.find(quote, 1)
        if end < 0:
            raise ValueError(f"the path's {quote} is not closed")
        return args[1:end], args[end + 1 :].strip()
    path, _, text = args.partition(" ")
    return path, text.strip()


def offered_file(path: str) -> Attachment:
    """The attachment for the local file at ``path``; ValueError (in words) when there is
    no readable regular file there."""
    resolved = Path(path).expanduser().resolve()
    try:
        info = resolved.stat()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or 'cannot be read'}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path}: not a regular file")
    if not os.access(resolved, os.R_OK):
        raise ValueError(f"{path}: permission denied")
    name = display_name(resolved.name)
    mime = mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"
    return Attachment(kind_of(mime), name, mime, info.st_size, source=str(resolved))
