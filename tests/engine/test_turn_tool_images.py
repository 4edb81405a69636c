"""Images a tool returns (``ToolResult.images``, docs/turn-loop.md §5): a vision model gets
them in a user message right after the turn's tool messages, built for each request of the
turn; the store keeps the tool's text note only; without vision the note is all."""

from __future__ import annotations

import base64
import json
from typing import Any

from core.agent.repair import NO_ANSWER
from core.agent.tool_images import FOLLOWS, MAX_IMAGES_PER_REQUEST
from core.tools.base import Tool, ToolContext, ToolResult
from tests.engine.conftest import Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call, reply_tool_calls

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def camera(count: int = 1) -> Tool:
    """``shot``: writes ``count`` PNGs into the workspace and names them, as an MCP image."""

    async def shot(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        label = args.get("label", "s")
        paths = tuple(f"shots/{label}{n}.png" for n in range(count))
        (ctx.workspace / "shots").mkdir(parents=True, exist_ok=True)
        for n, path in enumerate(paths):
            (ctx.workspace / path).write_bytes(PNG + bytes([n]))
        notes = "\n".join(f"[image image/png, 49 bytes: {path}]" for path in paths)
        return ToolResult(notes, images=paths)

    return make_tool("shot", shot)


def with_camera(rig: Rig, count: int = 1, *, vision: bool) -> None:
    rig.tools.register(camera(count))
    rig.agent(vision=vision)
    rig.server.strict = True  # a request with roles out of order fails the test's turn


def roles(request: Any) -> list[str]:
    return [m["role"] for m in request.messages]


def image_urls(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if not isinstance(content, list):
        return []
    return [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


def data_url(n: int = 0) -> str:
    return "data:image/png;base64," + base64.b64encode(PNG + bytes([n])).decode()


async def test_a_vision_model_gets_the_image_after_the_tool_message_and_the_store_no_bytes(
    rig: Rig,
) -> None:
    with_camera(rig, vision=True)
    rig.server.script(reply_tool_call("shot", {"label": "a"}, id="c1"), reply_text("A cat."))

    result = await rig.turn("what is on the screen?")

    assert result.reply == "A cat."
    after = rig.server.requests[1]
    assert roles(after) == ["system", "user", "assistant", "tool", "user"]
    tool, shown = after.messages[3], after.messages[4]
    assert tool["content"] == f"[image image/png, 49 bytes: shots/a0.png]\n{FOLLOWS}"
    assert image_urls(shown) == [data_url()]
    assert "shots/a0.png" in shown["content"][0]["text"]
    stored = await rig.stored()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].content == "[image image/png, 49 bytes: shots/a0.png]"
    assert "base64" not in json.dumps([m.to_wire() for m in stored])

    rig.server.script(reply_text("Still a cat."))
    await rig.turn("and now?")
    later = rig.server.requests[2]
    assert not any(image_urls(m) for m in later.messages)  # an earlier turn's: its note
    assert roles(later) == ["system", "user", "assistant", "tool", "assistant", "user"]


async def test_without_vision_the_tool_message_keeps_its_note_and_nothing_follows(
    rig: Rig,
) -> None:
    with_camera(rig, vision=False)
    rig.server.script(reply_tool_call("shot", {"label": "a"}, id="c1"), reply_text("A file."))

    await rig.turn("what is on the screen?")

    after = rig.server.requests[1]
    assert roles(after) == ["system", "user", "assistant", "tool"]
    assert after.messages[3]["content"] == "[image image/png, 49 bytes: shots/a0.png]"
    assert "image_url" not in json.dumps(after.messages)


async def test_images_follow_the_whole_batch_then_each_later_step_and_roles_alternate(
    rig: Rig,
) -> None:
    with_camera(rig, vision=True)
    rig.server.script(
        reply_tool_calls([("c1", "shot", {"label": "a"}), ("c2", "shot", {"label": "b"})]),
        reply_tool_call("shot", {"label": "c"}, id="c3"),
        reply_text("Three shots."),
    )

    await rig.turn("take pictures")

    last = rig.server.requests[2]
    assert roles(last) == [
        "system", "user", "assistant", "tool", "tool", "user", "assistant", "tool", "user",
    ]  # fmt: skip
    assert NO_ANSWER not in json.dumps(last.messages)
    assert [len(image_urls(m)) for m in last.messages] == [0, 0, 0, 0, 0, 2, 0, 0, 1]
    assert "shots/a0.png, shots/b0.png" in last.messages[5]["content"][0]["text"]


async def test_a_request_carries_only_the_turns_latest_images(rig: Rig) -> None:
    with_camera(rig, count=3, vision=True)
    rig.server.script(
        reply_tool_call("shot", {"label": "a"}, id="c1"),
        reply_tool_call("shot", {"label": "b"}, id="c2"),
        reply_text("Six shots."),
    )

    await rig.turn("take pictures")

    last = rig.server.requests[2]
    sent = [url for m in last.messages for url in image_urls(m)]
    assert len(sent) == MAX_IMAGES_PER_REQUEST == 4
    assert sent == [data_url(2), data_url(0), data_url(1), data_url(2)]  # a2, then b0..b2
    first_tool = last.messages[3]["content"]
    assert first_tool.endswith(FOLLOWS)  # a2 is sent; a0 and a1 keep their notes alone
