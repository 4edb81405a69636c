"""The offline ``demo`` provider: a scripted stand-in for a real model, with no network.

It lets a newcomer watch tools, progress and approvals without an API key. Its replies are
deterministic functions of the conversation and always say they come from the demo:

- last user message ``run: <cmd>``            -> a ``terminal`` tool call ``{"command": cmd}``
- ``ask: <question>? a|b|c``                  -> a ``clarify`` tool call
  ``{"question": "<question>?", "choices": ["a", "b", "c"]}``
- a message with files (the engine's attachment notes, ``docs/turn-loop.md`` §19)
                                              -> a ``read_file`` call per document, then
  an answer naming each file, its size and its first lines ("what is in this file?")
- after tool results                          -> a short summary of what each tool returned
- anything else                               -> a friendly reply naming the demo provider

A tool call is only emitted when that tool is offered in the request; otherwise the reply
says the tool is not enabled. With ``request.stream`` and ``on_delta``, the text is
streamed word by word (``chunk_delay`` seconds apart, 0 by default).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.model.base import ModelRequest
from core.types import ChatMessage, ModelReply, ToolCall, Usage

DEMO_LABEL = "[demo model]"
_SUMMARY_LIMIT = 300
_HINT = "Try `run: ls` to see a tool call, or `ask: Which colour? red|green|blue`."


class DemoModel:
    """A :class:`ModelClient` that answers from rules, never from the network."""

    def __init__(self, model: str = "demo", *, chunk_delay: float = 0.0) -> None:
        self._model = model
        self._chunk_delay = chunk_delay

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: ModelRequest) -> ModelReply:
        offered = {tool.name for tool in request.tools}
        reply = demo_reply(request.messages, offered)
        if request.stream and request.on_delta is not None and reply.content:
            for piece in _pieces(reply.content):
                await request.on_delta(piece)
                await asyncio.sleep(self._chunk_delay)
        return reply

    async def aclose(self) -> None:
        return None


def demo_reply(messages: Sequence[ChatMessage], offered: set[str]) -> ModelReply:
    """The demo's answer to ``messages`` when the tools in ``offered`` are available."""
    files = attached_files(_last_user_text(messages))
    if messages and messages[-1].role == "tool":
        described = _files_read(messages, files)
        return _text(described or summarise_tool_results(messages), messages)
    if files:
        return _about_files(files, messages, offered)
    text = _last_user_text(messages).strip()
    command, _, rest = text.partition(":")
    verb = command.strip().lower() if rest else ""
    if verb == "run":
        return _run(rest.strip(), messages, offered)
    if verb == "ask":
        return _ask(rest.strip(), messages, offered)
    return _text(_greeting(text), messages)


def summarise_tool_results(messages: Sequence[ChatMessage]) -> str:
    """One line per tool result since the last assistant message."""
    results: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.insert(0, message)
    names = _call_names(messages[-len(results) - 1] if len(messages) > len(results) else None)
    lines = [f"{DEMO_LABEL} Here is what the tools returned:"]
    for result in results:
        name = result.name or names.get(result.tool_call_id or "", "tool")
        lines.append(f"- `{name}`: {_excerpt(result.text())}")
    return "\n".join(lines)


_NOTE = re.compile(
    r"\[Attached (?P<kind>[\w ]+): (?P<name>.+?) \((?P<mime>[^,()]*), "
    r"(?P<size>\d[^()]*(?:\([^)]*\))?)\), saved in your workspace at (?P<path>[^;\]\n]+)"
)
"""An attachment note as :func:`core.agent.attachment_content.note` writes it."""
_FIRST_LINES = 5


@dataclass(frozen=True, slots=True)
class AttachedFile:
    kind: str
    name: str
    mime: str
    size: str
    path: str

    def describe(self) -> str:
        return f"{self.name} is {self.size} ({self.mime or 'unknown type'}), saved at {self.path}"


def attached_files(text: str) -> list[AttachedFile]:
    """The files a user message's attachment notes name, in order."""
    return [AttachedFile(**m.groupdict()) for m in _NOTE.finditer(text)]


def _about_files(
    files: list[AttachedFile], messages: Sequence[ChatMessage], offered: set[str]
) -> ModelReply:
    """Read each document with ``read_file`` (when offered), else say what arrived."""
    documents = [f for f in files if f.kind == "file"]
    if documents and "read_file" in offered:
        calls = tuple(
            ToolCall(f"demo_read_{len(messages)}_{n}", "read_file", json.dumps({"path": f.path}))
            for n, f in enumerate(documents)
        )
        return ModelReply(None, calls, "tool_calls", _usage(messages, ""))
    lines = [f"{DEMO_LABEL} You sent:"] + [f"- {f.describe()}" for f in files]
    return _text("\n".join(lines), messages)


def _files_read(messages: Sequence[ChatMessage], files: list[AttachedFile]) -> str | None:
    """The answer after the demo's ``read_file`` calls on the user's files: each file's
    name, size and first lines (None when the latest tool calls were something else)."""
    calls, by_path = _latest_calls(messages), {f.path: f for f in files}
    if not calls or any(c.name != "read_file" or _path_of(c) not in by_path for c in calls):
        return None
    results = {m.tool_call_id: m.text() for m in _latest_results(messages)}
    lines = [f"{DEMO_LABEL} Here is what you sent:"]
    for call in calls:
        first = results.get(call.id, "").splitlines()[:_FIRST_LINES] or ["(empty)"]
        lines.append(f"- {by_path[_path_of(call)].describe()}. Its first lines:")
        lines += [f"    {line}" for line in first]
    return "\n".join(lines)


def _latest_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    results: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.insert(0, message)
    return results


def _latest_calls(messages: Sequence[ChatMessage]) -> tuple[ToolCall, ...]:
    for message in reversed(messages):
        if message.role == "assistant":
            return message.tool_calls
    return ()


def _path_of(call: ToolCall) -> str:
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return ""
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return path if isinstance(path, str) else ""


def _run(command: str, messages: Sequence[ChatMessage], offered: set[str]) -> ModelReply:
    if not command:
        return _text(f"{DEMO_LABEL} Write a command after `run:`, e.g. `run: ls`.", messages)
    return _tool_call("terminal", {"command": command}, messages, offered)


def _ask(text: str, messages: Sequence[ChatMessage], offered: set[str]) -> ModelReply:
    question, mark, tail = text.rpartition("?")
    if not mark:
        question, tail = text, ""
    choices = [choice.strip() for choice in tail.split("|") if choice.strip()]
    arguments: dict[str, object] = {"question": question.strip() + mark, "choices": choices}
    return _tool_call("clarify", arguments, messages, offered)


def _tool_call(
    name: str, arguments: dict[str, object], messages: Sequence[ChatMessage], offered: set[str]
) -> ModelReply:
    if name not in offered:
        note = f"{DEMO_LABEL} I would call the `{name}` tool, but it is not enabled here."
        return _text(note, messages)
    call = ToolCall(f"demo_call_{len(messages)}", name, json.dumps(arguments))
    return ModelReply(None, (call,), "tool_calls", _usage(messages, call.arguments))


def _text(content: str, messages: Sequence[ChatMessage]) -> ModelReply:
    return ModelReply(content, (), "stop", _usage(messages, content))


def _greeting(text: str) -> str:
    heard = f"You said: “{_excerpt(text)}”. " if text else ""
    return (
        f"{DEMO_LABEL} Hello! {heard}I am the offline demo provider: my replies are canned, "
        f"not thought. {_HINT} Configure a real model in config.toml for real answers."
    )


_CLOCK_NOTE = re.compile(r"\n\n\[Current time: [^\]\n]*\]\s*\Z")
"""The engine's volatile tier at the end of a user message (``docs/turn-loop.md`` §2 step
3): what the user typed is the text before it."""


def _last_user_text(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return _CLOCK_NOTE.sub("", message.text())
    return ""


def _call_names(assistant: ChatMessage | None) -> dict[str, str]:
    if assistant is None:
        return {}
    return {call.id: call.name for call in assistant.tool_calls}


def _excerpt(text: str) -> str:
    flat = " ".join(text.split()) or "(no output)"
    return flat if len(flat) <= _SUMMARY_LIMIT else flat[:_SUMMARY_LIMIT] + "…"


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    pieces = [word + " " for word in words[:-1]] + [words[-1]]
    return [piece for piece in pieces if piece]


def _usage(messages: Sequence[ChatMessage], output: str) -> Usage:
    prompt = sum(len(message.text().split()) for message in messages)
    return Usage(prompt_tokens=prompt, completion_tokens=len(output.split()))
