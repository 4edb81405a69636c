"""The cluster codec (gateway/cluster/codec.py): events, calls and outcomes survive the trip
to another process as JSON text, equal (receipts aside), and text that is not ours is one
readable ValueError."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.base import (
    AdapterError,
    BadMarkup,
    Button,
    ChatRef,
    DownloadFailed,
    Forbidden,
    InboundEvent,
    MessageGone,
    NotModified,
    RateLimited,
    Sender,
    SentMessage,
    SessionKey,
    StreamRefused,
    TooLong,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    Priority,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.web.files import SnapshotUnreadable
from core.attachments import Attachment, OutgoingFile
from gateway.cluster.codec import (
    decode_call,
    decode_event,
    decode_outcome,
    encode_call,
    encode_event,
    encode_outcome,
)

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# any Python text, lone surrogates and control characters included, long ones too
texts = st.text(st.characters(), max_size=40) | st.text(
    st.characters(), min_size=3000, max_size=5000
)
short = st.text(st.characters(), max_size=12)
maybe = st.none() | short
chats = st.builds(ChatRef, short, short, maybe)
messages = st.builds(SentMessage, chats, short)
buttons = st.lists(
    st.lists(
        st.builds(Button, short, short, st.sampled_from(["approve", "deny", "choice"])), max_size=3
    ),
    max_size=3,
).map(lambda rows: tuple(tuple(row) for row in rows))
attachments = st.builds(
    Attachment,
    st.sampled_from(["image", "document", "audio", "voice", "video"]),
    short, short, st.integers(0, 2**40), short, short, short, maybe,
)  # fmt: skip
events = st.builds(
    InboundEvent,
    kind=st.sampled_from(["text", "command", "button", "stop"]),
    platform=short,
    update_id=short,
    chat=chats,
    chat_type=st.sampled_from(["dm", "group", "channel", "thread"]),
    sender=st.builds(Sender, short, short, st.booleans()),
    session_key=st.builds(
        SessionKey, short, st.sampled_from(["dm", "group", "thread"]), short, maybe, maybe
    ),
    text=texts,
    command=maybe,
    args=short,
    button_data=maybe,
    message=st.none() | messages,
    press_id=maybe,
    mentioned=st.booleans(),
    reply_to_bot=st.booleans(),
    attachments=st.lists(attachments, max_size=3).map(tuple),
    stream_id=maybe,
    source=st.none() | messages,
)
priorities = st.sampled_from(list(Priority))
keys = (
    st.none() | short | st.tuples(st.just("stream"), chats) | st.tuples(short, short, st.integers())
)
calls: st.SearchStrategy[Call] = st.one_of(
    st.builds(Send, chats, texts, buttons, st.booleans(), maybe,
              st.none() | st.floats(0, 2e9), priorities, keys),
    st.builds(Edit, messages, texts, buttons, st.booleans(), priorities, keys),
    st.builds(Delete, messages, priorities, keys),
    st.builds(AnswerPress, events, maybe, priorities, keys),
    st.builds(Typing, chats, priorities, keys),
    st.builds(LiveText, chats, texts, st.sampled_from(["append", "replace", "seal"]),
              priorities, keys),
    st.builds(React, messages, short, priorities, keys),
)  # fmt: skip


@FAST
@given(events)
def test_an_event_comes_back_equal_with_a_fresh_receipt(event: InboundEvent) -> None:
    event.receipt.settle(False)
    text = encode_event(event)
    text.encode("ascii")  # plain ASCII: any store column takes it
    back = decode_event(text)
    assert back == event
    assert back.receipt is not event.receipt and not back.receipt.settled


@FAST
@given(calls)
def test_a_call_comes_back_equal(call: Call) -> None:
    back = decode_call(encode_call(call))
    assert back == call
    assert type(back.priority) is Priority


def test_lone_surrogates_and_nul_survive_exactly() -> None:
    chat = ChatRef("telegram", "1")
    call = Send(chat, "a\ud800b\udfff\x00" + "é" * 5000)
    assert decode_call(encode_call(call)) == call


def test_a_coalesce_key_the_scheduler_folds_by_stays_the_same_key() -> None:
    chat = ChatRef("telegram", "7", "3")
    call = LiveText(chat, "x", "replace", Priority.STREAM, coalesce=("stream", chat))
    back = decode_call(encode_call(call))
    assert back.coalesce == ("stream", chat) and hash(back.coalesce) == hash(("stream", chat))
    typing = decode_call(encode_call(Typing(chat, coalesce=("typing", "telegram", "7"))))
    assert typing.coalesce == ("typing", "telegram", "7")


def test_an_object_key_cannot_cross_and_travels_as_none() -> None:
    call = Typing(ChatRef("telegram", "1"), coalesce=("x", object()))
    assert decode_call(encode_call(call)).coalesce is None


def test_a_file_travels_by_value_and_lands_in_the_spool(tmp_path: Path) -> None:
    workspace, spool = tmp_path / "ws", tmp_path / "spool"
    workspace.mkdir()
    content = bytes(range(256)) * 100
    (workspace / "report.pdf").write_bytes(content)
    file = OutgoingFile("k1", str(workspace / "report.pdf"), "report.pdf", "application/pdf",
                        len(content), "document", "cap")  # fmt: skip
    call = SendFile(ChatRef("telegram", "1"), file, "caption é", key="k1", priority=Priority.REPLY)
    text = encode_call(call)
    (workspace / "report.pdf").unlink()  # the owner never reads this process's files
    back = decode_call(text, spool)
    assert isinstance(back, SendFile)
    landed = Path(back.file.path)
    assert landed.parent == spool and landed.read_bytes() == content
    assert back == replace(call, file=replace(file, path=str(landed)))


def test_a_file_without_a_spool_or_unreadable_is_one_clear_error(tmp_path: Path) -> None:
    file = OutgoingFile("k", str(tmp_path / "gone.txt"), "gone.txt", "text/plain", 1, "document")
    with pytest.raises(AdapterError, match=r"cannot read gone\.txt to relay it"):
        encode_call(SendFile(ChatRef("telegram", "1"), file))
    (tmp_path / "gone.txt").write_text("x")
    text = encode_call(SendFile(ChatRef("telegram", "1"), file))
    with pytest.raises(ValueError, match="spool directory"):
        decode_call(text)


ERRORS = [
    AdapterError("telegram: boom"), MessageGone("gone"), NotModified("same"), TooLong("long"),
    Forbidden("blocked"), BadMarkup("bad <b>"), StreamRefused("no drafts here"),
    DownloadFailed("the file is gone"),
]  # fmt: skip


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_is_raised_again_as_its_class_with_its_message(error: AdapterError) -> None:
    with pytest.raises(type(error)) as caught:
        decode_outcome(encode_outcome(error))
    assert type(caught.value) is type(error) and str(caught.value) == str(error)


def test_a_rate_limit_keeps_its_wait_its_message_and_whether_it_was_given_up() -> None:
    limited = RateLimited(3.5, "telegram: flood")
    limited.final = True
    with pytest.raises(RateLimited) as caught:
        decode_outcome(encode_outcome(limited))
    assert caught.value.retry_after == 3.5 and caught.value.final
    assert str(caught.value) == "telegram: flood (retry after 3.5s)"


def test_an_error_subclass_of_the_tree_travels_as_its_nearest_class() -> None:
    with pytest.raises(AdapterError) as caught:
        decode_outcome(encode_outcome(SnapshotUnreadable("cannot read x")))
    assert type(caught.value) is AdapterError and str(caught.value) == "cannot read x"


def test_results_come_back() -> None:
    sent = SentMessage(ChatRef("slack", "C1", "17.5"), "18.1")
    assert decode_outcome(encode_outcome(sent)) == sent
    assert decode_outcome(encode_outcome(None)) is None


@pytest.mark.parametrize(
    ("decode", "text", "says"),
    [
        (decode_call, "{nope", "call: not JSON"),
        (decode_call, "[1]", "expected a JSON object"),
        (decode_call, '{"kind": "fly"}', "call: unknown kind 'fly'"),
        (decode_call, '{"kind": "typing"}', "typing: missing field 'chat'"),
        (decode_call, json.dumps({"kind": "typing", "chat": {"platform": "t", "chat_id": 1}}),
         "field 'chat_id' has the wrong type"),
        (decode_event, '{"kind": "text"}', "event: missing field"),
        (decode_outcome, "{}", "neither 'sent' nor 'error'"),
        (decode_outcome, '{"error": {"class": "KeyError", "message": "x"}}',
         "unknown class 'KeyError'"),
    ],
)  # fmt: skip
def test_text_that_is_not_ours_is_a_value_error_naming_what_is_wrong(
    decode: object, text: str, says: str
) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace("[", r"\[")):
        decode(text)  # type: ignore[operator]


def test_a_typing_call_with_a_bad_priority_is_refused() -> None:
    text = encode_call(Typing(ChatRef("t", "1"))).replace('"priority":4', '"priority":9')
    with pytest.raises(ValueError, match="unknown priority 9"):
        decode_call(text)
