"""The ``send_file`` tool (docs/turn-loop.md §19): files beneath the workspace only, text
redacted, binary holding a secret refused, then the checked bytes handed to the turn's
``on_file`` — nothing written in the workspace (the gateway keeps them outside it)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.attachments import OutgoingFile
from core.cancellation import CancellationToken
from core.redaction import MASK, remember_secrets
from core.tools import send_file
from core.tools.base import QueueFile, ToolContext, ToolRegistry, ToolResult
from core.tools.send_file import send_file_tool
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_text, reply_tool_call

SECRET = "bot-token-7f3a9c1e5b2d"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(16))


@pytest.fixture(autouse=True, scope="module")
def configured_secret() -> None:
    remember_secrets([SECRET])


class Chat:
    """A turn's ``on_file`` as the gateway gives it: keeps what it is handed."""

    def __init__(self, refusal: str | None = None) -> None:
        self.files: list[OutgoingFile] = []
        self.contents: list[bytes] = []
        self.refusal = refusal

    async def __call__(self, file: OutgoingFile, content: bytes) -> str | None:
        if self.refusal is None:
            self.files.append(file)
            self.contents.append(content)
        return self.refusal


def context(workspace: Path, queue: QueueFile | None, call_id: str = "call_1") -> ToolContext:
    return ToolContext(
        KEY, "session-1", "turn-1", call_id, CancellationToken(), workspace, queue_file=queue
    )


async def call(
    workspace: Path, chat: Chat | None, path: str, caption: str | None = None
) -> ToolResult:
    args = {"path": path} if caption is None else {"path": path, "caption": caption}
    return await send_file_tool().handler(args, context(workspace, chat))


def tree(workspace: Path) -> list[str]:
    """Every path in the workspace (send_file must add none)."""
    return sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*"))


async def test_the_model_sends_a_file_and_the_turn_hands_it_to_on_file(rig: Rig) -> None:
    (rig.profile.workspace / "report.csv").write_text("a,b\n1,2\n")
    before = tree(rig.profile.workspace)
    rig.tools = ToolRegistry([send_file_tool()])
    rig.server.script(
        reply_tool_call("send_file", {"path": "report.csv", "caption": "the numbers"}),
        reply_text("sent it"),
    )
    chat = Chat()

    message = UserMessage("send me the report", sender_id=USER)
    result = await rig.agent().run_turn(KEY, message, TurnControl(), on_file=chat)

    [file] = chat.files
    assert (file.name, file.mime, file.size, file.kind) == ("report.csv", "text/csv", 8, "document")
    assert file.caption == "the numbers"
    assert chat.contents[0] == b"a,b\n1,2\n"
    assert file.path == "" and tree(rig.profile.workspace) == before
    tool_result = rig.server.requests[1].messages[-1]["content"]
    assert tool_result == "Queued report.csv (8 bytes); it is sent to the chat with your reply."
    assert result.reply == "sent it"


async def test_a_turn_without_on_file_tells_the_model_the_chat_cannot_take_files(
    rig: Rig,
) -> None:
    (rig.profile.workspace / "a.txt").write_text("hi")
    before = tree(rig.profile.workspace)
    rig.tools = ToolRegistry([send_file_tool()])
    rig.server.script(reply_tool_call("send_file", {"path": "a.txt"}), reply_text("sorry"))

    await rig.turn("send a.txt")

    tool_result = rig.server.requests[1].messages[-1]["content"]
    assert tool_result == "send_file: this conversation cannot receive files"
    assert tree(rig.profile.workspace) == before


async def test_a_refusal_from_the_chat_is_the_tools_error(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"\x01\x02")
    result = await call(tmp_path, Chat("over the chat's upload limit of 8 MB"), "big.bin")
    assert result.is_error
    assert result.text == "send_file: big.bin is not sent: over the chat's upload limit of 8 MB"


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/hostname"])
async def test_a_path_out_of_the_workspace_is_refused(tmp_path: Path, path: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("not yours")
    chat = Chat()

    result = await call(workspace, chat, path)

    assert result.is_error and "escapes the workspace" in result.text
    assert chat.files == [] and tree(workspace) == []


async def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("host file")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    chat = Chat()

    result = await call(workspace, chat, "link.txt")

    assert result.is_error and "escapes the workspace through the symlink" in result.text
    assert chat.files == []


async def test_a_directory_a_fifo_and_an_empty_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "empty.txt").write_bytes(b"")
    chat = Chat()

    folder, pipe, empty = [await call(tmp_path, chat, p) for p in ("folder", "pipe", "empty.txt")]

    assert "is a directory, not a regular file" in folder.text
    assert "is a FIFO, not a regular file" in pipe.text
    assert empty.text == "send_file: empty.txt is empty; there is nothing to send"
    assert all(r.is_error for r in (folder, pipe, empty)) and chat.files == []


async def test_a_file_over_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(send_file, "MAX_SEND_BYTES", 1024)
    (tmp_path / "huge.log").write_bytes(b"x" * 1025)

    result = await call(tmp_path, Chat(), "huge.log")

    assert result.text == (
        "send_file: huge.log is 1.0 KB (1,025 bytes), over the limit of 1.0 KB (1,024 bytes)"
    )


async def test_a_text_file_is_sent_redacted_and_the_original_left_alone(tmp_path: Path) -> None:
    original = f"token={SECRET}\nencoded={base64.b64encode(SECRET.encode()).decode()}\n"
    (tmp_path / "env.txt").write_text(original)
    chat = Chat()

    result = await call(tmp_path, chat, str(tmp_path / "env.txt"))  # absolute, inside

    [file] = chat.files
    sent = chat.contents[0].decode()
    assert SECRET not in sent and sent.count(MASK) == 2
    assert (tmp_path / "env.txt").read_text() == original
    assert file.size == len(sent.encode()) and not result.is_error


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s.encode(),
        lambda s: base64.b64encode(b"\x00\x01" + s.encode()),
        lambda s: s.encode("utf-16-le"),
    ],
    ids=["verbatim", "base64", "utf-16"],
)
async def test_a_binary_file_holding_the_secret_is_refused(tmp_path: Path, encode: object) -> None:
    assert callable(encode)
    (tmp_path / "dump.bin").write_bytes(b"\x00\xffhead" + encode(SECRET) + b"\x00tail")
    chat = Chat()

    result = await call(tmp_path, chat, "dump.bin")

    assert result.is_error
    assert result.text == "send_file: dump.bin holds a configured secret; not sent"
    assert chat.files == [] and tree(tmp_path) == ["dump.bin"]


async def test_a_picture_goes_as_a_photo_and_a_large_one_as_a_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "poster.png").write_bytes(PNG + b"\x00" * 100)
    monkeypatch.setattr(send_file, "MAX_PHOTO_BYTES", len(PNG))
    chat = Chat()

    await call(tmp_path, chat, "chart.png", caption="  weekly  ")
    await call(tmp_path, chat, "poster.png")

    [chart, poster] = chat.files
    assert (chart.kind, chart.mime, chart.caption) == ("photo", "image/png", "weekly")
    assert (poster.kind, poster.mime) == ("document", "image/png")
    assert chat.contents[0] == PNG


async def test_the_key_is_stable_per_call_and_the_shown_name_is_harmless(tmp_path: Path) -> None:
    (tmp_path / "r\u202eport ü.txt").write_text("hello")
    tool, first_chat, again_chat = send_file_tool(), Chat(), Chat()
    args = {"path": "r\u202eport ü.txt"}

    await tool.handler(args, context(tmp_path, first_chat))
    await tool.handler(args, context(tmp_path, again_chat))  # a replay of the same call
    await tool.handler(args, context(tmp_path, again_chat, call_id="call_2"))

    [first], [again, other] = first_chat.files, again_chat.files
    assert first.key == again.key != other.key and len(first.key) == 24
    assert first.name == "rport ü.txt"  # the override character is dropped
    assert tree(tmp_path) == ["r\u202eport ü.txt"]


async def test_a_secret_across_the_scans_megabyte_boundary_is_found(tmp_path: Path) -> None:
    blob = bytearray(b"\xff" * (2 << 20))
    at = (1 << 20) - len(SECRET) // 2  # half in the first megabyte, half in the second
    blob[at : at + len(SECRET)] = SECRET.encode()
    (tmp_path / "image.raw").write_bytes(bytes(blob))

    result = await call(tmp_path, Chat(), "image.raw")

    assert result.text == "send_file: image.raw holds a configured secret; not sent"
