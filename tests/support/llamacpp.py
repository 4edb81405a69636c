"""llama.cpp's ``llama-server`` as the scripted model server plays it: its context size,
its token counts and its chat templates' refusals, from recorded behaviour.

Recorded against ``llama-server`` (0.6.0-dev) with SmolLM2-135M-Instruct, ``-c 4096``
(/work/shared/research/real-model-servers.md, second check, N1 and N2); the bodies are
test data in ``tests/data/llamacpp/`` (its README says where each comes from):

* **token counts**: SmolLM2's tokenizer made 2.0 characters a token of ``ls -la`` output
  and 1.8 of log lines — twice what bytes / 4 assumes. :func:`count_tokens` is a
  deterministic stand-in with the same densities (checked against the recorded
  ``ls -la /usr/bin`` output and log paste by ``tests/engine/test_llamacpp_replay.py``):
  a word with its leading space, each digit, each other symbol, a newline, up to two
  spaces — each one token. A request's prompt is counted as the ChatML template lays it
  out (the system text, the tools block, every message with its role line);
* **the context size**: a prompt of more than ``n_ctx`` tokens is refused with the
  recorded HTTP 400 ``exceed_context_size_error`` body, its ``n_prompt_tokens`` and
  ``n_ctx`` the real counts;
* **strict alternation** (``alternation=True``): llama.cpp's shipped
  ``mistralai-Mistral-Nemo-Instruct-2407.jinja`` counts user and assistant messages —
  not tool results nor assistant tool calls — after the optional system message, and
  raises unless they alternate user/assistant starting with user: HTTP 400 with the
  recorded "Unable to generate parser for this template" body.

Install on a server with :meth:`LlamaCpp.install`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.model_replies import Json, ReceivedRequest, Reply, reply_json
from tests.support.model_server import ScriptedModelServer

DATA = Path(__file__).resolve().parent.parent / "data" / "llamacpp"
_TOKEN = re.compile(r" ?[A-Za-z]+|\d| {1,2}|\n|[^\sA-Za-z\d]")
_PER_MESSAGE = 2
"""``<|im_start|>`` and ``<|im_end|>``: one token each."""


def recorded(name: str) -> Any:
    """A recorded body from ``tests/data/llamacpp/``."""
    return json.loads((DATA / name).read_text())


def recorded_text(name: str) -> str:
    return (DATA / name).read_text()


def count_tokens(text: str) -> int:
    """Tokens of ``text`` at the recorded densities (see the module docstring)."""
    return len(_TOKEN.findall(text))


def prompt_text(request: ReceivedRequest) -> str:
    """The request as a ChatML template renders it (without its special tokens)."""
    messages = request.wire_messages
    parts: list[str] = []
    for index, message in enumerate(messages):
        parts.append(f"{message.get('role')}\n{_content(message)}")
        if index == 0 and request.tools:
            parts.append("\n".join(json.dumps(tool) for tool in request.tools))
    return "\n".join(parts)


def prompt_tokens(request: ReceivedRequest) -> int:
    return count_tokens(prompt_text(request)) + _PER_MESSAGE * len(request.wire_messages)


def _content(message: Json) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content)
    calls = [json.dumps(call.get("function", {})) for call in message.get("tool_calls") or ()]
    return "\n".join([str(content), *calls])


def alternates(messages: list[Json]) -> bool:
    """The Mistral-Nemo template's check: after the optional system message, the user and
    assistant messages (tool results and tool calls not counted) alternate, user first."""
    counted = [
        m["role"]
        for m in messages
        if m.get("role") in ("user", "assistant") and not m.get("tool_calls")
    ]
    return all(role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(counted))


def exceed_context_size(n_prompt: int, n_ctx: int) -> Reply:
    """The recorded 400 with this request's counts."""
    body = recorded("exceed_context_size.json")
    error = body["error"]
    error["message"] = (
        f"request ({n_prompt} tokens) exceeds the available context size ({n_ctx} tokens),"
        " try increasing it"
    )
    error["n_prompt_tokens"], error["n_ctx"] = n_prompt, n_ctx
    return reply_json(body, status=400)


@dataclass
class LlamaCpp:
    """One ``llama-server`` with ``-c n_ctx`` (and, ``alternation``, a Mistral template)."""

    n_ctx: int
    alternation: bool = False

    def install(self, server: ScriptedModelServer) -> ScriptedModelServer:
        server.count_tokens = prompt_tokens
        server.checks.append(self.refusal)
        return server

    def refusal(self, request: ReceivedRequest) -> Reply | None:
        """The server's error for ``request``, or None when it is taken."""
        if self.alternation and not alternates(request.wire_messages):
            return reply_json(recorded("mistral_alternation.json"), status=400)
        counted = request.prompt_tokens or 0
        if counted > self.n_ctx:
            return exceed_context_size(counted, self.n_ctx)
        return None
