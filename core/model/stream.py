"""Assemble a streamed (SSE) Chat Completion into one :class:`ModelReply`.

The server sends ``data: {chunk}`` events separated by blank lines and ends with
``data: [DONE]``. Text arrives as ``choices[0].delta.content`` fragments. Tool calls arrive
as ``choices[0].delta.tool_calls`` entries keyed by ``index``: the first entry for an index
carries ``id`` and ``function.name``; later ones carry ``function.arguments`` fragments to be
concatenated in order. Several calls may be interleaved. A final chunk with empty
``choices`` may carry ``usage``. An ``{"error": ...}`` chunk raises a classified error.
The assembled calls' arguments are checked like a whole reply's
(:func:`core.model.arguments.checked_call`): a call cut off by ``finish_reason: length``
inside its arguments comes out with ``{}`` and its text in ``unparsed``.

The stream is an edge (:mod:`core.text`): text is made valid (:func:`core.text.valid_text`)
where it leaves the assembler: each fragment handed out for display, and the joined reply
text, arguments and names — joining first, so a surrogate pair split across two chunks
becomes its character again, and a lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core.model.arguments import checked_call
from core.model.classify import bad_response, classify_error_object
from core.model.errors import ModelError
from core.model.wire import Json, finish_reason, parse_json, parse_usage
from core.text import valid_json, valid_text
from core.types import FinishReason, ModelReply, ToolCall, Usage


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def merge(self, raw: Json) -> None:
        if not self.id and isinstance(raw.get("id"), str):
            self.id = raw["id"]
        function = raw.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name != self.name:  # some servers resend the whole name
            self.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.arguments.append(arguments)
        elif arguments is not None:
            self.arguments.append(json.dumps(valid_json(arguments)))

    def finish(self, position: int) -> ToolCall:
        if not self.name:
            raise ModelError(bad_response(f"streamed tool call #{position} has no function name"))
        call_id = valid_text(self.id) or f"call_{position}"
        return checked_call(call_id, valid_text(self.name), valid_text("".join(self.arguments)))


@dataclass(slots=True)
class StreamAssembler:
    """Feed it the lines of the response body; read ``reply()`` when ``done``."""

    done: bool = False
    _data: list[str] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)
    _calls: dict[int, _PartialCall] = field(default_factory=dict)
    _finish_reason: FinishReason | None = None
    _finished: bool = False
    _usage: Usage = field(default_factory=Usage)

    def feed_line(self, line: str) -> str | None:
        """Take one line; return the text fragment it completed, if any."""
        if line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
            return None
        if line.strip() or not self._data:
            return None  # comments (": keep-alive"), "event:" and "id:" lines, stray blanks
        return self._dispatch()

    def end(self) -> str | None:
        """The body ended: dispatch a last event not followed by a blank line."""
        return self._dispatch() if self._data else None

    def reply(self) -> ModelReply:
        if not self.done and not self._finished:
            raise ModelError(bad_response("model stream ended before [DONE] or a finish_reason"))
        calls = tuple(self._calls[i].finish(n) for n, i in enumerate(sorted(self._calls)))
        return ModelReply(
            content=valid_text("".join(self._text)) if self._text or not calls else None,
            tool_calls=calls,
            finish_reason=self._finish_reason,
            usage=self._usage,
        )

    def _dispatch(self) -> str | None:
        data = "\n".join(self._data)
        self._data.clear()
        if data.strip() == "[DONE]":
            self.done = True
            return None
        chunk = parse_json(data, "model stream event")
        if not isinstance(chunk, dict):
            raise ModelError(bad_response("model stream event is not a JSON object"))
        return self._apply(chunk)

    def _apply(self, chunk: Json) -> str | None:
        if "error" in chunk:
            raise ModelError(classify_error_object(valid_json(chunk["error"])))
        if chunk.get("usage"):
            self._usage = parse_usage(chunk["usage"], chunk.get("timings"))
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        choice: Json = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self._finished = True
            self._finish_reason = finish_reason(choice["finish_reason"])
        delta = choice.get("delta")
        return self._apply_delta(delta) if isinstance(delta, dict) else None

    def _apply_delta(self, delta: Json) -> str | None:
        for raw in delta.get("tool_calls") or ():
            if isinstance(raw, dict):
                self._call_for(raw).merge(raw)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            return valid_text(content)
        return None

    def _call_for(self, raw: Json) -> _PartialCall:
        index: Any = raw.get("index")
        if not isinstance(index, int):  # servers that omit index: a new id starts a new call
            known = any(c.id == raw.get("id") for c in self._calls.values())
            index = len(self._calls) if raw.get("id") and not known else len(self._calls) - 1
        return self._calls.setdefault(max(index, 0), _PartialCall())
