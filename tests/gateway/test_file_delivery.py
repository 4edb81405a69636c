"""Files the agent sends (gateway/turns/files.py, docs/attachments.md "Outbound"):
queued during the turn (upload_limit checked), sent once after the reply, kept across a
replay, given up with one notice when the platform refuses them for good."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from adapters.base import AdapterError, Forbidden, InboundEvent
from core.agent.profile import AgentProfile
from core.attachments import OutgoingFile
from core.tools.send_file import send_file_tool
from gateway.outbound.directory import Place
from gateway.turns.files import CANNOT_RECEIVE
from tests.gateway.fakes import TELEGRAMISH, FakeAdapter, FakeClock, Step, event
from tests.gateway.harness import ALICE, Gateway, GatewayFactory

MB = 1024 * 1024
SLOW = Step(tools=(("slow", {}),))


def files_adapter(limit: int = 50 * MB) -> FakeAdapter:
    return FakeAdapter(capabilities=replace(TELEGRAMISH, upload_limit=limit), clock=FakeClock())


PNG = b"\x89PNG...."


def snapshot(tmp_path: Path, name: str = "chart.png", data: bytes = PNG) -> OutgoingFile:
    """A file as ``send_file`` hands it over (its bytes are :data:`PNG`; no path yet: the
    gateway's spool gives it one)."""
    return OutgoingFile(f"key-{name}", "", name, "image/png", len(data), "photo", "here")


def place(gw: Gateway) -> tuple[str, Place]:
    key = str(event(ALICE).session_key)
    found = gw.service.directory.place(key)
    assert found is not None
    return key, found


async def queue_during_turn(
    gw: Gateway, *files: OutgoingFile, before_reply: Callable[[], None] = lambda: None
) -> tuple[InboundEvent, list[str | None]]:
    """Start a turn whose tool waits, queue ``files`` as its ``on_file`` would, then let it
    finish (``before_reply`` runs just before)."""
    inbound = await gw.say(ALICE, "make a chart")
    await gw.tool_started.wait()
    key, where = place(gw)
    on_file = partial(gw.service.files.queue, key, where)
    answers = [await on_file(file, PNG) for file in files]
    before_reply()
    gw.gate.set()
    await gw.idle()
    return inbound, answers


async def test_a_queued_file_is_sent_once_after_the_reply(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(SLOW, Step("here is your chart"), adapter=files_adapter()) as gw:
        file = snapshot(tmp_path)
        inbound, answers = await queue_during_turn(gw, file)
        assert answers == [None]

        methods = [c.method for c in gw.adapter.calls if c.method in ("send", "send_file")]
        assert methods[-2:] == ["send", "send_file"]  # the reply first, then the file
        (sent,) = gw.adapter.of("send_file")
        assert sent.file is not None and sent.key == file.key and sent.text == "here"
        assert replace(sent.file, path="") == file
        spooled = Path(sent.file.path)  # kept in the gateway's spool, outside the workspace
        assert spooled.parent == gw.service.files.spool.root / file.key
        assert sent.content == PNG and sent.in_flight_since is None
        session = await gw.store.get_active_session(str(event(ALICE).session_key))
        assert session is not None and await gw.store.unsent_files(session.id) == []

        await gw.service.inbound(inbound)  # replayed
        await gw.idle()
        assert len(gw.adapter.of("send_file")) == 1


async def test_a_chat_that_cannot_take_files_refuses_them_when_queued(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(SLOW, Step("done"), adapter=files_adapter(limit=0)) as gw:
        _, answers = await queue_during_turn(gw, snapshot(tmp_path))
        assert answers == [CANNOT_RECEIVE]
        assert gw.adapter.of("send_file") == []


async def test_a_file_over_the_platforms_upload_limit_is_refused_when_queued(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(SLOW, Step("done"), adapter=files_adapter(limit=1 * MB)) as gw:
        big = replace(snapshot(tmp_path, "big.bin"), size=3 * MB)
        _, answers = await queue_during_turn(gw, big)
        assert answers == ["big.bin is over Fake's 1 MB upload limit"]
        assert gw.adapter.of("send_file") == []


async def test_a_file_refused_for_good_is_given_up_with_one_notice(
    running: GatewayFactory, tmp_path: Path
) -> None:
    adapter = files_adapter()
    adapter.fail("send_file", Forbidden("the bot may not send files in this chat"))
    async with running(SLOW, Step("done"), Step("again"), adapter=adapter) as gw:
        await queue_during_turn(gw, snapshot(tmp_path))
        await gw.say(ALICE, "next")
        await gw.idle()

        assert len(gw.adapter.of("send_file")) == 1  # not tried again after the next reply
        notices = [t for t in gw.adapter.texts() if "could not be sent" in t]
        assert notices == [
            "⚠️ chart.png could not be sent: the bot may not send files in this chat."
        ]


async def test_a_file_that_failed_for_now_goes_after_the_next_reply(
    running: GatewayFactory, tmp_path: Path
) -> None:
    adapter = files_adapter()
    adapter.fail("send_file", AdapterError("connection reset"))
    async with running(SLOW, Step("done"), Step("again"), adapter=adapter) as gw:
        await queue_during_turn(gw, snapshot(tmp_path))
        started = gw.adapter.of("send_file")[0]
        await gw.say(ALICE, "next")
        await gw.idle()

        first, second = gw.adapter.of("send_file")
        assert first.in_flight_since is None and started is first
        assert second.in_flight_since is not None  # marked started, never marked sent
        assert [t for t in gw.adapter.texts() if "could not be sent" in t] == []


async def test_a_snapshot_gone_before_the_send_is_told_once(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(SLOW, Step("done"), adapter=files_adapter()) as gw:
        file = snapshot(tmp_path)
        spooled = gw.service.files.spool.root / file.key / "chart.png"
        await queue_during_turn(gw, file, before_reply=lambda: os.unlink(spooled))

        notices = [t for t in gw.adapter.texts() if "could not be sent" in t]
        assert len(notices) == 1 and notices[0].startswith("⚠️ chart.png could not be sent")


async def test_files_of_a_stopped_turn_are_not_sent(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(SLOW, Step("never"), adapter=files_adapter()) as gw:
        await gw.say(ALICE, "chart")
        await gw.tool_started.wait()
        key, where = place(gw)
        await gw.service.files.queue(key, where, snapshot(tmp_path), PNG)
        await gw.say(ALICE, "/stop")
        await gw.idle()

        assert gw.adapter.of("send_file") == []
        session = await gw.store.get_active_session(key)
        assert session is not None and await gw.store.unsent_files(session.id) == []


async def test_the_send_file_tool_delivers_a_workspace_file_after_the_reply(
    running: GatewayFactory, tmp_path: Path
) -> None:
    home = AgentProfile(workspace=tmp_path / "ws", workspace_scope="session")
    key = str(event(ALICE).session_key)
    (home.workspaces().ensure(key) / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\nchart")
    send = Step(tools=(("send_file", {"path": "chart.png", "caption": "the chart"}),))
    tool = send_file_tool(workspaces=home.workspaces())
    async with running(send, Step("sent"), profile=home, adapter=files_adapter(),
                       more_tools=[tool]) as gw:  # fmt: skip
        await gw.say(ALICE, "send me the chart")
        await gw.idle()

        result = [m for m in gw.model.requests[-1].messages if m.role == "tool"][-1]
        assert str(result.content).startswith("Queued chart.png")
        (sent,) = gw.adapter.of("send_file")
        assert sent.content == b"\x89PNG\r\n\x1a\nchart" and sent.text == "the chart"
        assert sent.file is not None and sent.file.kind == "photo"
        assert gw.adapter.calls.index(sent) > gw.adapter.calls.index(gw.adapter.of("send")[-1])
