"""The demo model on an upload (issue 20, point 7): "what is in this file?" reads the file
with ``read_file`` and answers with its name, size and first lines — through the real
engine, the real notes and the real file tool, no key."""

from __future__ import annotations

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import TurnResult, UserMessage
from core.attachments import Attachment
from core.model.demo import DEMO_LABEL, DemoModel
from core.tools.base import ToolRegistry
from core.tools.files import read_file_tool
from tests.engine.conftest import KEY, USER, Rig

LINES = [f"line {n}: value {n * n}" for n in range(1, 8)]


def upload(rig: Rig, name: str, data: bytes, kind: str, mime: str) -> Attachment:
    inbox = rig.profile.workspace / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / name).write_bytes(data)
    return Attachment(kind, name, mime, len(data), path=f"inbox/{name}")  # type: ignore[arg-type]


async def ask(rig: Rig, tools: ToolRegistry, *files: Attachment) -> TurnResult:
    agent = CommonAgent(
        rig.store, DemoModel(), tools, rig.hooks, rig.approvals, rig.profile, clock=rig.clock
    )
    message = UserMessage("what is in this file?", sender_id=USER, attachments=files)
    return await agent.run_turn(KEY, message, TurnControl())


async def test_what_is_in_this_file_names_the_file_its_size_and_first_lines(rig: Rig) -> None:
    data = ("\n".join(LINES) + "\n").encode()
    notes = upload(rig, "notes.txt", data, "document", "text/plain")

    result = await ask(rig, ToolRegistry([read_file_tool()]), notes)

    assert result.status == "completed" and result.reply is not None
    assert result.reply.startswith(DEMO_LABEL)
    assert f"notes.txt is {len(data)} bytes (text/plain), saved at inbox/notes.txt" in result.reply
    assert all(line in result.reply for line in LINES[:5])
    assert LINES[5] not in result.reply
    [_, call, tool, _] = await rig.stored()
    assert [c.name for c in call.tool_calls] == ["read_file"] and tool.role == "tool"


async def test_without_read_file_the_demo_says_what_arrived(rig: Rig) -> None:
    png = upload(rig, "shot.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 2000, "image", "image/png")

    result = await ask(rig, ToolRegistry([]), png)

    assert result.reply == (
        f"{DEMO_LABEL} You sent:\n"
        "- shot.png is 2.0 KB (2,008 bytes) (image/png), saved at inbox/shot.png"
    )
