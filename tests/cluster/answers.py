"""The scripted model of the cluster's end-to-end tests and benchmark, and reading its
answers back: :class:`Answers` answers each request from what it carries, whichever process
asks and in whatever order (tests/cluster/harness.py, docs/cluster.md §8 replay).

A message's text says what its turn does: ``plain-...`` is answered at once, ``tool-...``
calls a tool first (``read_file`` or ``terminal``, alternately) and answers after its
result, and a text given to :meth:`Answers.hold` waits for an event before its first
answer, which then reads ``... (held)``. From the stored assistant messages
(:func:`answer_keys`) and the requests kept (``Answers.asked``), :func:`calls_after_stored`
finds a model call made for an answer the store already held.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from tests.platform_sim.base import SimMessage
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)

Stage = Literal["first", "after_tool"]
"""A message's model calls: the first; and, in a tool turn, the one after the tool result."""

ANSWER_PREFIX = "answer: "
HELD_SUFFIX = " (held)"


def answer_of(text: str) -> str:
    """What the model answers to the message ``text`` (the whole bot message)."""
    return f"{ANSWER_PREFIX}{text}"


def is_tool_message(text: str) -> bool:
    """A message starting with "tool" makes a tool turn (read_file or terminal, then text)."""
    return text.startswith("tool")


def tag_of(arguments: dict[str, Any]) -> str:
    if "path" in arguments:
        return str(arguments["path"]).removeprefix("tag-").removesuffix(".txt")
    return str(arguments.get("command", "")).removeprefix("echo tag-")


@dataclass(frozen=True, slots=True)
class Asked:
    """One model request: for which message, at which stage, when (wall clock)."""

    text: str
    stage: Stage
    at: float


class Answers:
    """The scripted model of the cluster tests: each request is answered from what it
    carries, whichever process asks and in whatever order.

    A plain message ``text`` is answered ``answer: <text>``. A tool message (``tool ...``)
    first gets a tool call — ``read_file`` of ``tag-<text>.txt``, or for every other one
    ``terminal`` running ``echo tag-<text>`` — and after the tool result its answer. A held
    message (:meth:`hold`) waits on an event before its first answer, which then reads
    ``answer: <text> (held)``. Every request is kept in ``asked``.
    """

    def __init__(self, server: ScriptedModelServer) -> None:
        self.server = server
        self.asked: list[Asked] = []
        self._holds: dict[str, asyncio.Event] = {}
        self._tool_turns = 0

    def install(self, requests: int) -> None:
        """Script ``requests`` answers (the server takes one per request)."""
        self.server.script(*[self.reply] * requests)

    def hold(self, text: str, until: asyncio.Event) -> None:
        """The next first request for ``text`` waits until ``until`` is set."""
        self._holds[text] = until

    def reply(self, request: ReceivedRequest) -> Reply:
        text = request.last_user_text
        after_tool = request.messages[-1].get("role") == "tool"
        stage: Stage = "after_tool" if after_tool else "first"
        self.asked.append(Asked(text, stage, time.time()))
        if (held := self._holds.pop(text, None)) is not None and not after_tool:
            return reply_hang(then=reply_text(answer_of(text) + HELD_SUFFIX), until=held)
        if is_tool_message(text) and not after_tool:
            return self._tool_call(text)
        return reply_text(answer_of(text))

    def _tool_call(self, text: str) -> Reply:
        self._tool_turns += 1
        if self._tool_turns % 2:
            return reply_tool_call("read_file", {"path": f"tag-{text}.txt"})
        return reply_tool_call("terminal", {"command": f"echo tag-{text}"})

    def counts(self) -> Counter[tuple[str, Stage]]:
        return Counter((asked.text, asked.stage) for asked in self.asked)


def calls_after_stored(answers: Answers, stored: dict[tuple[str, Stage], float]) -> list[Asked]:
    """Model requests made after the answer they ask for was already stored: the second
    model call for a stored answer that replay must never make."""
    late = (a for a in answers.asked if (a.text, a.stage) in stored)
    return [a for a in late if a.at > stored[a.text, a.stage]]


def is_answer_to(text: str, *, held: bool = False) -> Callable[[SimMessage], bool]:
    """Whether a message is the answer to ``text`` (``held``: its held first answer)."""
    expected = answer_of(text) + (HELD_SUFFIX if held else "")
    return lambda message: message.text == expected


def answer_counts(messages: Iterable[SimMessage], texts: Iterable[str]) -> dict[str, int]:
    """How many live bot messages carry the answer to each of ``texts``."""
    shown = Counter(m.text for m in messages if m.from_bot and not m.deleted)
    return {text: shown[answer_of(text)] for text in texts}


def answer_keys(content: str | None, tool_calls: str | None) -> list[tuple[str, Stage]]:
    keys: list[tuple[str, Stage]] = []
    if content and content.startswith(ANSWER_PREFIX):
        text = content.removeprefix(ANSWER_PREFIX).removesuffix(HELD_SUFFIX)
        keys.append((text, "after_tool" if is_tool_message(text) else "first"))
    for call in json.loads(tool_calls) if tool_calls else []:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        keys.append((tag_of(arguments), "first"))
    return keys
