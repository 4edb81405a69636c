"""What the model sees of a user's files (docs/turn-loop.md §19): notes, inlined text,
image parts for a vision profile; the history keeps references, never bytes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import Any

from core.agent.attachment_content import for_request, image_ref
from core.agent.compaction import SUMMARY_PROMPT, render
from core.agent.context import IMAGE_TOKENS, raw_estimate
from core.agent.control import TurnControl
from core.agent.turn import TurnResult, UserMessage
from core.attachments import Attachment
from core.store.base import AttachmentRecord
from core.types import ChatMessage
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import ReceivedRequest, Reply, reply_hang, reply_text

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
ORIGIN = "telegram:77"


def saved(rig: Rig, name: str, data: bytes, kind: str = "document", mime: str = "") -> Attachment:
    """A file as the intake leaves it: written under ``inbox/`` in the workspace."""
    inbox = rig.profile.workspace / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / name).write_bytes(data)
    return Attachment(
        kind=kind,  # type: ignore[arg-type]
        name=name,
        mime=mime or "text/plain",
        size=len(data),
        source="file-1",
        sha256=hashlib.sha256(data).hexdigest(),
        path=f"inbox/{name}",
    )


def photo(rig: Rig, name: str = "shot.png") -> Attachment:
    return saved(rig, name, PNG, kind="image", mime="image/png")


async def send(rig: Rig, text: str, *files: Attachment, origin: str | None = None) -> TurnResult:
    message = UserMessage(text, sender_id=USER, origin=origin, attachments=files)
    return await rig.agent().run_turn(KEY, message, TurnControl())


def sent_user(rig: Rig, request: int = 0, index: int = -1) -> Any:
    """The content of a user message the model got (the latest one by default)."""
    users = [m for m in rig.server.requests[request].messages if m["role"] == "user"]
    return users[index]["content"]


def parts_of(content: Any, kind: str) -> list[dict[str, Any]]:
    return [p for p in content if p["type"] == kind] if isinstance(content, list) else []


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in parts_of(content, "text"))


async def test_a_photo_reaches_a_vision_model_as_an_image_part_with_its_note(rig: Rig) -> None:
    rig.agent(vision=True)
    rig.server.script(reply_text("a screenshot"))

    await send(rig, "what is this error?", photo(rig))

    content = sent_user(rig)
    [image] = parts_of(content, "image_url")
    expected = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert image == {"type": "image_url", "image_url": {"url": expected}}
    assert "what is this error?" in text_of(content)
    assert "Attached image: shot.png (image/png, 48 bytes)" in text_of(content)
    assert "saved in your workspace at inbox/shot.png" in text_of(content)
    [*_, wire_user] = [m for m in rig.server.requests[0].wire_messages if m["role"] == "user"]
    assert [p["type"] for p in wire_user["content"]] == ["text", "image_url", "text"]
    assert wire_user["content"][-1]["text"].startswith("[Current time: ")


async def test_the_stored_message_keeps_the_reference_not_the_bytes(rig: Rig) -> None:
    rig.agent(vision=True)
    rig.server.script(reply_text("ok"))

    await send(rig, "look", photo(rig))

    [user, _] = await rig.stored()
    assert isinstance(user.content, list)
    assert user.content[1] == image_ref("inbox/shot.png")
    assert "base64" not in json.dumps(user.content)


async def test_a_photo_to_a_model_without_vision_is_a_note_only(rig: Rig) -> None:
    rig.server.script(reply_text("noted"))

    await send(rig, "", photo(rig))

    content = sent_user(rig)
    assert "image_url" not in json.dumps(content)
    assert "Attached image: shot.png" in text_of(content)
    assert "inbox/shot.png" in text_of(content)
    [user, _] = await rig.stored()
    assert isinstance(user.content, str)


async def test_a_later_turn_sees_the_earlier_photos_note_but_not_its_bytes(rig: Rig) -> None:
    rig.agent(vision=True)
    rig.server.script(reply_text("a cat"), reply_text("it was a cat"))
    await send(rig, "what is this?", photo(rig))

    await send(rig, "what was in the picture?")

    earlier = sent_user(rig, request=1, index=0)
    assert parts_of(earlier, "image_url") == []
    assert "Attached image: shot.png" in text_of(earlier)
    assert "base64" not in json.dumps(rig.server.requests[1].messages)


async def test_a_photo_gone_from_the_workspace_is_sent_as_its_note(rig: Rig) -> None:
    rig.agent(vision=True)
    rig.server.script(reply_text("ok"))
    gone = photo(rig)
    (rig.profile.workspace / gone.path).unlink()

    await send(rig, "see", gone)

    content = sent_user(rig)
    assert parts_of(content, "image_url") == []
    assert "Attached image: shot.png" in text_of(content)


async def test_a_text_file_at_the_inline_limit_is_inlined_and_one_byte_more_is_not(
    rig: Rig,
) -> None:
    rig.agent(inline_bytes=64)
    rig.server.script(reply_text("one"), reply_text("two"))
    fits = saved(rig, "fits.txt", b"x" * 63 + b"\n")
    over = saved(rig, "over.txt", b"y" * 64 + b"\n")

    await send(rig, "read this", fits)
    await send(rig, "and this", over)

    first, second = text_of(sent_user(rig, 0)), text_of(sent_user(rig, 1))
    assert "----- begin fits.txt -----\n" + "x" * 63 + "\n----- end fits.txt -----" in first
    assert "Attached file: over.txt (text/plain, 65 bytes)" in second
    assert "yyyy" not in second and "begin over.txt" not in second


async def test_a_binary_file_is_noted_and_never_inlined(rig: Rig) -> None:
    rig.server.script(reply_text("a pdf"), reply_text("bytes"))
    pdf = saved(rig, "report.pdf", b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n", mime="application/pdf")
    nul = saved(rig, "nul.txt", b"text\x00more")

    await send(rig, "", pdf)
    await send(rig, "", nul)

    assert "Attached file: report.pdf (application/pdf, 14 bytes)" in text_of(sent_user(rig, 0))
    assert "begin" not in text_of(sent_user(rig, 0))
    assert "begin" not in text_of(sent_user(rig, 1))


async def test_a_voice_note_carries_its_transcript_unless_the_text_holds_it(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))
    voice = saved(rig, "note.ogg", b"OggS\x00\x02", kind="voice", mime="audio/ogg")
    heard = Attachment(**{**_fields(voice), "transcript": "call mum at six"})

    await send(rig, "", heard)
    await send(rig, "call mum at six", heard)

    assert 'transcript: "call mum at six"' in text_of(sent_user(rig, 0))
    second = text_of(sent_user(rig, 1))
    assert second.count("call mum at six") == 1 and "voice note: note.ogg" in second


async def test_the_stored_message_is_linked_to_its_files(rig: Rig) -> None:
    rig.server.script(reply_text("ok"))
    file = saved(rig, "a.txt", b"hello\n")
    await rig.store.put_attachment(AttachmentRecord(ORIGIN, 0, KEY, file, "saved"))

    await send(rig, "here", file, origin=ORIGIN)

    [row] = await rig.store.attachments_of(ORIGIN)
    session = await rig.store.get_active_session(KEY)
    assert session is not None
    [user, _] = await rig.store.load_active_messages(session.id)
    assert row.message_id == user.id


async def test_a_replayed_photo_message_is_stored_once_and_its_image_sent_again(
    rig: Rig,
) -> None:
    rig.agent(vision=True)
    rig.server.script(reply_hang(reply_text("lost")), reply_text("a chart"))
    shot = photo(rig)
    message = UserMessage("look", sender_id=USER, origin=ORIGIN, attachments=(shot,))
    first = asyncio.create_task(rig.agent().run_turn(KEY, message, TurnControl()))
    await rig.server.wait_for_requests(1)
    first.cancel()
    await asyncio.wait({first})

    result = await send(rig, "look", shot, origin=ORIGIN)

    assert result.reply == "a chart"
    assert len(parts_of(sent_user(rig, 1), "image_url")) == 1
    assert [m.role for m in await rig.stored()] == ["user", "assistant"]


def test_an_image_part_counts_as_a_fixed_number_of_tokens_in_the_estimate() -> None:
    text = ChatMessage(role="user", content=[{"type": "text", "text": "look"}])
    huge = "data:image/png;base64," + "A" * 400_000
    with_image = ChatMessage(
        role="user",
        content=[
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": huge}},
        ],
    )
    assert raw_estimate([with_image]) == raw_estimate([text]) + IMAGE_TOKENS


def test_text_and_summaries_of_image_content_read_its_notes() -> None:
    note = "look\n\n[Attached image: a.png (image/png, 3 bytes), saved in ...]"
    message = ChatMessage(role="user", content=[{"type": "text", "text": note}, image_ref("a.png")])
    assert message.text() == note
    assert render([message]) == f"User: {note}"
    assert for_request(message, {}).content == [{"type": "text", "text": note}]


def _fields(attachment: Attachment) -> dict[str, Any]:
    return {name: getattr(attachment, name) for name in Attachment.__slots__}


def summary_or_ok(request: ReceivedRequest) -> Reply:
    if request.messages[0]["content"] == SUMMARY_PROMPT:
        return reply_text("Summary: a photo, then notes.")
    return reply_text("ok")


async def test_a_conversation_with_a_photo_compacts_to_the_photos_note(rig: Rig) -> None:
    rig.agent(vision=True, context_window=3000)
    rig.server.script(*[summary_or_ok] * 60)
    await send(rig, "message 0: see this", photo(rig))

    for number in range(1, 25):
        result = await rig.turn(f"message {number}: " + "please keep this in mind " * 30)
        assert result.reply == "ok"

    summaries = [r for r in rig.server.requests if r.messages[0]["content"] == SUMMARY_PROMPT]
    assert summaries, "no summarisation request reached the server"
    source = summaries[0].messages[-1]["content"]
    assert "Attached image: shot.png" in source and "base64" not in source
    assert "base64" not in json.dumps(rig.server.requests[-1].messages)
