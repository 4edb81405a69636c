"""The intake (gateway/turns/intake.py, docs/attachments.md): an admitted message's files saved
into the session's workspace under inbox/ before its turn, with one reply per refusal.

A whole gateway on real parts (SQLite store, CommonAgent, Dispatcher, a real temp
workspace); the platform is the FakeAdapter serving registered bytes, the model scripted.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import replace
from pathlib import Path

from core.agent.profile import AgentProfile
from core.attachments import Attachment
from core.store.base import AttachmentRecord
from gateway.turns.intake import Attachments, IntakeLimits
from gateway.turns.workspace_files import partial_name
from tests.gateway.fakes import Step, event
from tests.gateway.harness import ALICE, MALLORY, Gateway, GatewayFactory, with_profile

REPORT = b"line one\nline two\n"


def profile(tmp_path: Path, **changes: object) -> AgentProfile:
    return with_profile(workspace=tmp_path / "workspaces", workspace_scope="session", **changes)


def workspace(gw: Gateway) -> Path:
    key = str(event(ALICE).session_key)
    return gw.service.profile_for(key).session_workspace(key)


def inbox(gw: Gateway) -> list[str]:
    path = workspace(gw) / "inbox"
    return sorted(os.listdir(path)) if path.is_dir() else []


def last_user_text(gw: Gateway) -> str:
    user = [m for m in gw.model.requests[-1].messages if m.role == "user"][-1]
    content = user.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def files_under(root: Path) -> set[Path]:
    return {Path(d) / f for d, _, names in os.walk(root) for f in names}


async def send(gw: Gateway, text: str, *files: Attachment, **where: object) -> None:
    await gw.service.inbound(event(ALICE, text, attachments=files, **where))  # type: ignore[arg-type]
    await gw.idle()


async def test_a_file_is_saved_in_the_session_workspace_and_its_note_reaches_the_model(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("got it"), profile=profile(tmp_path)) as gw:
        offered = gw.adapter.serve("report", REPORT)
        inbound = event(ALICE, "what is in this file?", attachments=(offered,))
        await gw.service.inbound(inbound)
        await gw.idle()

        saved = workspace(gw) / "inbox" / "report.txt"
        assert saved.read_bytes() == REPORT
        assert inbox(gw) == ["report.txt"]
        text = last_user_text(gw)
        assert "what is in this file?" in text and "inbox/report.txt" in text
        (row,) = await gw.store.attachments_of(f"fake:{inbound.update_id}")
        assert row.state == "saved"
        assert row.attachment.sha256 == hashlib.sha256(REPORT).hexdigest()
        assert row.attachment.size == len(REPORT)
        assert gw.adapter.texts() == ["got it"]


async def test_a_file_declared_over_max_bytes_is_refused_without_a_download_and_the_text_runs(
    running: GatewayFactory, tmp_path: Path
) -> None:
    limits = Attachments(IntakeLimits(max_bytes=1024 * 1024))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=limits) as gw:
        big = replace(gw.adapter.serve("big", b"x"), size=3 * 1024 * 1024, name="big.iso")
        await send(gw, "look", big)

        assert gw.adapter.downloads == []
        refusal, reply = gw.adapter.texts()
        assert "big.iso" in refusal and "over the 1 MB limit" in refusal and "(3 MB)" in refusal
        assert reply == "ok"
        assert "big.iso" not in last_user_text(gw)


async def test_a_file_that_passes_the_limit_while_downloading_is_stopped_and_deleted(
    running: GatewayFactory, tmp_path: Path
) -> None:
    limits = Attachments(IntakeLimits(max_bytes=10_000))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=limits) as gw:
        undeclared = replace(gw.adapter.serve("dump", b"y" * 50_000), size=0)
        await send(gw, "", undeclared)

        (refusal,) = gw.adapter.texts()
        assert "dump.txt" in refusal and "over the" in refusal
        assert inbox(gw) == []  # the partial file is gone too
        assert gw.model.requests == []  # nothing left to run: no model call


async def test_a_kind_not_accepted_gets_one_reply_and_no_download(
    running: GatewayFactory, tmp_path: Path
) -> None:
    limits = Attachments(IntakeLimits(kinds=frozenset({"image", "document"})))
    async with running(Step("ok"), profile=profile(tmp_path), attachments=limits) as gw:
        clip = replace(gw.adapter.serve("clip", b"v"), kind="video", name="clip.mp4")
        await send(gw, "", clip)

        assert gw.adapter.downloads == []
        assert gw.adapter.texts() == ["⚠️ clip.mp4 was not taken in: videos are not accepted here."]
        assert gw.model.requests == []


async def test_each_failed_file_gets_one_reply_and_the_rest_of_the_message_runs(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("done"), profile=profile(tmp_path)) as gw:
        good = gw.adapter.serve("good", REPORT)
        gone = replace(good, source="gone", name="gone.pdf")  # nothing registered: 404
        broken = gw.adapter.serve("broken", b"z" * 10_000)
        gw.adapter.breaks["broken"] = 5_000
        await send(gw, "three files", gone, good, broken)

        first, second, reply = gw.adapter.texts()
        assert first.startswith("⚠️ gone.pdf could not be downloaded: the file is gone")
        assert second.startswith("⚠️ broken.txt could not be downloaded: the connection broke")
        assert reply == "done"
        assert inbox(gw) == ["good.txt"]
        text = last_user_text(gw)
        assert "inbox/good.txt" in text and "gone.pdf" not in text and "broken" not in text


HOSTILE = (
    "../../../../etc/passwd",
    "..",
    "...",
    "a/../../b.txt",
    "evil\x00.txt",
    "x" * 500 + ".pdf",
    "invoice\u202efdp.exe",
    "CON.txt",
    "nul",
    "\\\\server\\share\\x.doc",
    ".bashrc",
    "",
    "é" * 300,
)


async def test_hostile_names_are_neutralised_and_nothing_is_written_outside_the_inbox(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("ok"), profile=profile(tmp_path)) as gw:
        before = files_under(tmp_path)
        offered = [
            replace(gw.adapter.serve(f"h{i}", b"%d" % i), name=name)
            for i, name in enumerate(HOSTILE)
        ]
        await send(gw, "hostile", *offered)

        names = inbox(gw)
        assert len(names) == len(HOSTILE)
        for name in names:
            assert "/" not in name and "\\" not in name and "\x00" not in name
            assert "\u202e" not in name and not name.startswith(".")
            assert len(name) <= 120 and len(name.encode()) <= 200
            assert name.split(".")[0].upper() not in {"CON", "NUL"}
        assert "x" * 116 + ".pdf" in names  # cut to 120 characters, the extension kept
        written = files_under(tmp_path) - before
        inbox_dir = workspace(gw) / "inbox"
        assert {p.parent for p in written} <= {inbox_dir, tmp_path}  # inbox, or the database
        assert all(p.name.startswith("gateway.db") for p in written if p.parent == tmp_path)
        assert {(inbox_dir / n).read_bytes() for n in names} == {b"%d" % i for i in range(13)}


async def test_an_inbox_the_model_made_a_symlink_is_not_followed(
    running: GatewayFactory, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    async with running(Step("ok"), profile=profile(tmp_path)) as gw:
        home = workspace(gw)
        home.mkdir(parents=True)
        (home / "inbox").symlink_to(outside)  # planted by a sandboxed command
        await send(gw, "here", gw.adapter.serve("report", REPORT))

        assert os.listdir(outside) == []
        refusal, reply = gw.adapter.texts()
        assert refusal.startswith("⚠️ report.txt could not be saved: inbox/ in the workspace")
        assert "symlink" in refusal
        assert reply == "ok"


async def test_a_replayed_update_downloads_nothing_twice(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("first"), profile=profile(tmp_path)) as gw:
        offered = gw.adapter.serve("report", REPORT)
        inbound = event(ALICE, "read it", attachments=(offered,))
        await gw.service.inbound(inbound)
        await gw.idle()
        await gw.service.inbound(inbound)  # the inbox replays the same update
        await gw.idle()

        assert gw.adapter.downloads == ["report"]
        assert inbox(gw) == ["report.txt"]
        assert len(gw.model.requests) == 1  # the stored answer is the replay's result


async def test_a_partial_download_left_by_a_crash_is_discarded_and_fetched_again(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("ok"), profile=profile(tmp_path)) as gw:
        offered = gw.adapter.serve("report", REPORT)
        inbound = event(ALICE, "again", attachments=(offered,))
        origin = f"fake:{inbound.update_id}"
        box = workspace(gw) / "inbox"
        box.mkdir(parents=True)
        (box / partial_name(origin, 0)).write_bytes(b"half of an older try" * 100)
        key = str(inbound.session_key)
        crashed = AttachmentRecord(origin, 0, key, offered, "downloading")
        await gw.store.put_attachment(crashed)

        await gw.service.inbound(inbound)
        await gw.idle()

        assert inbox(gw) == ["report.txt"]
        assert (box / "report.txt").read_bytes() == REPORT
        (row,) = await gw.store.attachments_of(origin)
        assert row.state == "saved"


async def test_a_name_already_taken_gets_a_numbered_one(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("one"), Step("two"), profile=profile(tmp_path)) as gw:
        await send(gw, "first", gw.adapter.serve("report", b"1"))
        await send(gw, "second", gw.adapter.serve("report", b"2"))

        assert inbox(gw) == ["report-2.txt", "report.txt"]
        assert (workspace(gw) / "inbox" / "report-2.txt").read_bytes() == b"2"


async def test_a_strangers_file_is_never_downloaded(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("no"), profile=profile(tmp_path)) as gw:
        offered = gw.adapter.serve("secret", REPORT)
        await gw.service.inbound(event(MALLORY, "hi", attachments=(offered,)))

        assert gw.adapter.downloads == []
        assert gw.model.requests == []


async def test_a_message_with_files_queues_rather_than_steer_the_running_turn(
    running: GatewayFactory, tmp_path: Path
) -> None:
    steering = profile(tmp_path, busy_policy="steer")
    async with running(Step(tools=(("slow", {}),)), Step("first done"), Step("second"),
                       profile=steering) as gw:  # fmt: skip
        await gw.say(ALICE, "start")
        await gw.tool_started.wait()
        await gw.service.inbound(
            event(ALICE, "and this", attachments=(gw.adapter.serve("r", b"r"),))
        )
        assert gw.adapter.downloads == []  # not taken in while the turn runs
        gw.gate.set()
        await gw.idle()

        assert gw.adapter.downloads == ["r"]
        assert len(gw.model.requests) == 3
        assert "inbox/r.txt" in last_user_text(gw)


async def test_a_saved_file_deleted_since_is_fetched_again_on_a_replay(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("first"), profile=profile(tmp_path)) as gw:
        inbound = event(ALICE, "read it", attachments=(gw.adapter.serve("report", REPORT),))
        await gw.service.inbound(inbound)
        await gw.idle()
        (workspace(gw) / "inbox" / "report.txt").unlink()  # the model cleaned up
        await gw.service.inbound(inbound)
        await gw.idle()

        assert gw.adapter.downloads == ["report", "report"]
        assert inbox(gw) == ["report.txt"]


async def test_stop_ends_a_download_and_leaves_no_partial_file(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("never"), profile=profile(tmp_path)) as gw:
        gw.adapter.download_gate = asyncio.Event()  # the download hangs after its first chunk
        gw.adapter.chunk_size = 4
        inbound = event(ALICE, "big one", attachments=(gw.adapter.serve("big", REPORT),))
        await gw.service.inbound(inbound)
        await gw.adapter.wait_for(lambda: gw.adapter.downloads == ["big"])
        await gw.say(ALICE, "/stop")
        await gw.idle()

        assert gw.model.requests == []
        assert inbox(gw) == []
        (row,) = await gw.store.attachments_of(f"fake:{inbound.update_id}")
        assert row.state == "downloading"  # a replay fetches it again
