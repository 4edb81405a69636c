"""The external-runtime bypass (seed 001 §3.9): a real subprocess speaking JSON lines."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from core.agent.control import TurnControl
from tests.engine.conftest import Rig

RUNTIME = """
import json, sys
request = json.loads(sys.stdin.readline())
messages = request["messages"]
def send(event):
    print(json.dumps(event), flush=True)
send({"type": "tool", "id": "x1", "name": "grep", "arguments": '{"q": "a"}', "result": "3 hits"})
send({"type": "progress", "text": "thinking"})
print("debug noise that is not JSON", flush=True)
send({"type": "reply", "text": f"got {messages[-1]['content']!r} after {messages[0]['role']}"})
"""

CRASHING = """
import sys
sys.stdin.readline()
print("could not load the model", file=sys.stderr)
sys.exit(3)
"""

HANGING = """
import json, os, signal, sys
sys.stdin.readline()
with open("runtime.pid", "w") as out:  # the workspace is the working directory
    out.write(str(os.getpid()))
print(json.dumps({"type": "progress", "text": "working"}), flush=True)
signal.pause()  # hang until killed: the runtime never answers
"""


def use_runtime(rig: Rig, tmp_path: Path, source: str) -> None:
    script = tmp_path / "runtime.py"
    script.write_text(textwrap.dedent(source))
    rig.agent(external_runtime=(sys.executable, str(script)))


async def test_external_runtime_takes_the_whole_turn(rig: Rig, tmp_path: Path) -> None:
    use_runtime(rig, tmp_path, RUNTIME)
    steps: list[tuple[int, list[dict[str, Any]]]] = []

    result = await rig.turn("find a", step_callback=lambda i, t: steps.append((i, t)))

    assert (result.status, result.exit_reason) == ("completed", "external_runtime")
    assert result.reply == "got 'find a' after system"
    assert rig.server.requests == []
    assert [(m.role, m.content) for m in await rig.stored()] == [
        ("user", "find a"),
        ("assistant", result.reply),
    ]
    assert steps == [(1, [{"name": "grep", "result": "3 hits", "arguments": '{"q": "a"}'}])]
    [record] = await rig.store.list_tool_calls(result.turn_id)
    assert (record.call_id, record.name, record.result) == ("x1", "grep", "3 hits")
    assert rig.log.names() == [
        "on_session_start",
        "pre_llm_call",
        "transform_llm_output",
        "post_llm_call",
        "on_session_end",
    ]


async def test_external_runtime_exiting_without_a_reply_fails_the_turn(
    rig: Rig, tmp_path: Path
) -> None:
    use_runtime(rig, tmp_path, CRASHING)

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason) == ("failed", "external_runtime")
    assert result.error == "runtime exited with code 3 without a reply: could not load the model"
    turn = await rig.store.get_turn(result.turn_id)
    assert turn is not None and turn.error == result.error


async def test_stop_kills_the_external_runtime(rig: Rig, tmp_path: Path) -> None:
    use_runtime(rig, tmp_path, HANGING)
    started = asyncio.Event()

    def on_step(iteration: int, tools: list[dict[str, Any]]) -> None:
        started.set()

    control = TurnControl()
    turn = asyncio.create_task(rig.turn("hi", control=control, step_callback=on_step))
    await asyncio.wait_for(started.wait(), 10)
    pid = int((tmp_path / "runtime.pid").read_text())

    began = time.monotonic()
    control.stop()
    result = await asyncio.wait_for(turn, 5)

    assert time.monotonic() - began < 1.0  # killed, not left to end by itself
    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
