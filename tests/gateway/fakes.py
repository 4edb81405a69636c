"""In-memory fakes of our own ports, for the gateway's unit tests.

``FakeAdapter`` is an :class:`adapters.base.Adapter` that records every call and can be
told to fail the next calls with our error tree. ``ScriptedModel`` is a
:class:`core.model.base.ModelClient` answering from a script; a step may wait on an
``asyncio.Event`` (a model call that hangs until released). ``FakeClock`` replaces time:
``sleep`` advances it at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.base import (
    ButtonRows,
    Capabilities,
    ChatRef,
    ChatType,
    DownloadFailed,
    EventSink,
    InboundEvent,
    Sender,
    SentMessage,
    StreamRefused,
)
from adapters.calls import AnswerPress, Delete, Edit, LiveText, Send, SendFile, Typing
from adapters.calls import Call as OutboundCall
from adapters.health import Health
from adapters.session_keys import session_key
from adapters.telegram.render import TelegramRenderer
from core.attachments import Attachment, OutgoingFile
from core.model.base import ModelRequest
from core.types import ModelReply, ToolCall

TELEGRAMISH = Capabilities(
    max_text_length=4096,
    length_unit="utf16",
    supports_edit=True,
    button_payload_limit=64,
    edit_interval=1.0,
    markup="telegram_html",
    renderer=TelegramRenderer(),
)
WAIT = 5.0


@dataclass
class Call:
    method: str
    text: str = ""
    message: SentMessage | None = None
    buttons: ButtonRows = ()
    markup: bool = True
    at: float = 0.0
    event: InboundEvent | None = None
    key: str | None = None
    file: OutgoingFile | None = None
    content: bytes = b""
    """A sent file's bytes, as read when the call was made."""
    in_flight_since: float | None = None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


@dataclass
class FakeAdapter:
    platform: str = "fake"
    capabilities: Capabilities = TELEGRAMISH
    clock: Callable[[], float] = field(default=lambda: 0.0)
    calls: list[Call] = field(default_factory=list)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    """A call of a method named here is recorded, then waits until its event is set."""
    sink: EventSink | None = None
    stopped: bool = False
    health: Health = field(default_factory=lambda: Health("up", 0.0))
    files: dict[str, bytes | Exception] = field(default_factory=dict)
    """What ``download`` serves per attachment ``source``: the bytes, or an error to raise
    before the first byte."""
    breaks: dict[str, int] = field(default_factory=dict)
    """A download of this ``source`` raises ``DownloadFailed`` after this many bytes."""
    downloads: list[str] = field(default_factory=list)
    """The ``source`` of every download begun, in order."""
    chunk_size: int = 4096
    download_gate: asyncio.Event | None = None
    """Set: each download waits on it after its first chunk (a download in progress)."""
    refusing: str | None = None
    """Set (:meth:`refuse_streams`): ``LiveText`` replace calls raise ``StreamRefused``."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def fail(self, method: str, *errors: Exception) -> None:
        """The next calls of ``method`` raise ``errors``, in order."""
        self.failures.setdefault(method, []).extend(errors)

    def refuse_streams(self, why: str = "TEXTDRAFT_PEER_INVALID") -> None:
        """Every native stream update from now on raises ``StreamRefused`` (the call is
        still recorded, as ``live_text:replace``), as a group chat refuses drafts."""
        self.refusing = why

    async def _record(self, call: Call) -> None:
        call.at = self.clock()
        pending = self.failures.get(call.method)
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        hold = self.holds.get(call.method)
        if hold is not None:
            await hold.wait()
        if pending:
            raise pending.pop(0)

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def texts(self, method: str = "send") -> list[str]:
        return [c.text for c in self.of(method)]

    async def wait_for(self, condition: Callable[[], bool], timeout: float = WAIT) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(condition)

    async def wait_sent(self, predicate: Callable[[str], bool]) -> Call:
        await self.wait_for(lambda: any(predicate(c.text) for c in self.of("send")))
        return next(c for c in self.of("send") if predicate(c.text))

    def serve(self, source: str, content: bytes | Exception) -> Attachment:
        """Offer ``content`` as a document at ``source`` (its declared size the real one)."""
        self.files[source] = content
        size = len(content) if isinstance(content, bytes) else 0
        return Attachment("document", f"{source}.txt", "text/plain", size, source=source)

    # the Adapter port --------------------------------------------------------------------
    async def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The bytes registered for ``attachment.source``, in ``chunk_size`` chunks."""
        async with self._changed:
            self.downloads.append(attachment.source)
            self._changed.notify_all()
        content = self.files.get(attachment.source)
        if content is None:
            raise DownloadFailed("the file is gone from the platform")
        if isinstance(content, Exception):
            raise content
        cut = self.breaks.get(attachment.source, len(content))
        for start in range(0, max(cut, 1), self.chunk_size):
            yield content[start : min(start + self.chunk_size, cut)]
            if self.download_gate is not None:
                await self.download_gate.wait()
        if cut < len(content):
            raise DownloadFailed("the connection broke")

    async def start(self, sink: EventSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        self.stopped = True

    async def perform(self, call: OutboundCall) -> SentMessage | None:
        """Record ``call`` under its method name (send, edit, delete, answer, typing)."""
        match call:
            case Send(chat, text, buttons, markup, key):
                message = SentMessage(chat, str(next(self._ids)))
                await self._record(Call("send", text, message, buttons, markup, key=key))
                return message
            case SendFile(chat, file, caption, key, since):
                message = SentMessage(chat, str(next(self._ids)))
                content = await asyncio.to_thread(Path(file.path).read_bytes)
                sent = Call("send_file", caption, message, key=key, file=file, content=content,
                            in_flight_since=since)  # fmt: skip
                await self._record(sent)
                return message
            case Edit(message, text, buttons, markup):
                await self._record(Call("edit", text, message, buttons, markup))
            case Delete(message):
                await self._record(Call("delete", message=message))
            case AnswerPress(event, text):
                await self._record(Call("answer", text or "", event.message, event=event))
            case Typing():
                await self._record(Call("typing"))
            case LiveText(_, text, mode):
                await self._record(Call(f"live_text:{mode}", text))
                if self.refusing is not None and mode == "replace":
                    raise StreamRefused(f"{self.platform}: {self.refusing}")
        return None


_updates = itertools.count(1)


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    is_bot: bool = False

    def sender(self) -> Sender:
        return Sender(self.id, self.name, self.is_bot)


def event(
    who: Person,
    text: str = "",
    *,
    chat_id: str = "100",
    chat_type: ChatType = "dm",
    thread_id: str | None = None,
    mentioned: bool = False,
    button: str | None = None,
    on: SentMessage | None = None,
    platform: str = "fake",
    attachments: tuple[Attachment, ...] = (),
    update_id: str | None = None,
) -> InboundEvent:
    """An inbound event as an adapter would build it (commands parsed from ``/cmd args``)."""
    key = session_key(platform, chat_type, chat_id, user_id=who.id, thread_id=thread_id)
    common: dict[str, Any] = {
        "platform": platform,
        "update_id": update_id or str(next(_updates)),
        "chat": ChatRef(platform, chat_id, thread_id),
        "chat_type": chat_type,
        "sender": who.sender(),
        "session_key": key,
        "mentioned": mentioned,
    }
    if button is not None:
        return InboundEvent(kind="button", button_data=button, message=on, press_id="p", **common)
    if text.startswith("/"):
        head, _, args = text[1:].partition(" ")
        name = head.split("@", 1)[0].lower()
        return InboundEvent(kind="command", text=text, command=name, args=args, **common)
    return InboundEvent(kind="text", text=text, attachments=attachments, **common)


@dataclass
class Step:
    """One scripted model answer; ``gate`` (if set) must be released before it returns."""

    content: str | None = None
    tools: tuple[tuple[str, dict[str, Any]], ...] = ()
    gate: asyncio.Event | None = None
    streamed: bool = False
    """A streaming request gets ``content`` word by word (``ModelRequest.on_delta``), each
    word after ``ScriptedModel.pause`` (the test clock's sleep, say)."""


class ScriptedModel:
    def __init__(
        self, *steps: Step, pause: Callable[[float], Awaitable[None]] | None = None
    ) -> None:
        self.steps = list(steps)
        self.pause = pause
        self.word_seconds = 0.3
        """The pause before each streamed word."""
        self.requests: list[ModelRequest] = []
        self.called = asyncio.Event()

    @property
    def model(self) -> str:
        return "scripted"

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        self.called.set()
        step = self.steps.pop(0) if self.steps else Step("(script ended)")
        if step.gate is not None:
            await step.gate.wait()
        if step.streamed and step.content and request.stream and request.on_delta:
            for word in re.findall(r"\S+\s*", step.content):
                if self.pause is not None:
                    await self.pause(self.word_seconds)
                await request.on_delta(word)
        calls = tuple(
            ToolCall(f"call-{len(self.requests)}-{i}", name, _json(args))
            for i, (name, args) in enumerate(step.tools)
        )
        return ModelReply(step.content, calls, "tool_calls" if calls else "stop")

    async def aclose(self) -> None:
        return None


def _json(args: dict[str, Any]) -> str:
    return json.dumps(args)
