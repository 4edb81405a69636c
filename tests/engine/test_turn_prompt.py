"""Three prompt tiers and the restore-or-build check (seed 000 step 3, seed 001 §3.2)."""

from __future__ import annotations

import os
from pathlib import Path

from core.agent.prompt import Runtime
from tests.engine.conftest import KEY, Rig, echo_tool
from tests.support.model_server import reply_text


def system_of(rig: Rig, index: int) -> str:
    first = rig.server.requests[index].messages[0]
    assert first["role"] == "system"
    return str(first["content"])


def prefix_of(system: str) -> str:
    """The cached prefix: the whole system message (the volatile tier is not in it)."""
    return system


async def test_system_prompt_has_stable_and_context_tiers_and_the_clock_rides_on_the_user(
    rig: Rig,
) -> None:
    rig.server.script(reply_text("ok"))

    await rig.turn("hi")

    system = system_of(rig, 0)
    assert system.startswith("You are Test.\n\n## Session\n")
    assert f"Session: {KEY}" in system
    assert "Tools: echo" in system
    assert "Current time" not in system
    last = rig.server.requests[0].wire_messages[-1]
    assert last == {"role": "user", "content": "hi\n\n[Current time: Friday 2027-01-15 08:00 UTC]"}
    assert [m.content for m in await rig.stored()] == ["hi", "ok"]  # the note is never stored


async def test_cached_prefix_is_byte_identical_on_later_turns(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))

    await rig.turn("first")
    rig.clock.advance(3600)
    await rig.turn("second")

    first, second = system_of(rig, 0), system_of(rig, 1)
    assert first == second  # the volatile tier is no longer in the system message
    later = rig.server.requests[1].wire_messages
    assert later[1] == {"role": "user", "content": "first"}  # last turn's note is gone
    assert later[-1]["content"] == "second\n\n[Current time: Friday 2027-01-15 09:00 UTC]"
    session = await rig.store.get_active_session(KEY)
    assert session is not None and session.system_prompt == prefix_of(first)


async def test_stored_prefix_is_reused_even_if_it_would_be_built_differently(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))
    await rig.turn("first")
    session = await rig.store.get_active_session(KEY)
    assert session is not None and session.prompt_fingerprint is not None
    frozen = "You are Test.\n\nFROZEN CONTEXT FROM AN EARLIER BUILD"
    await rig.store.save_session_prompt(
        session.id, frozen_context="x", system_prompt=frozen, fingerprint=session.prompt_fingerprint
    )

    await rig.turn("second")

    assert prefix_of(system_of(rig, 1)) == frozen


async def test_prefix_is_rebuilt_when_soul_md_was_edited(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))
    await rig.turn("first")

    rig.agent(soul="You are Test, now terser.")
    await rig.turn("second")

    assert system_of(rig, 1).startswith("You are Test, now terser.\n\n## Session")
    session = await rig.store.get_active_session(KEY)
    assert session is not None and session.system_prompt == prefix_of(system_of(rig, 1))


async def test_prefix_is_rebuilt_when_the_toolset_changed(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))
    await rig.turn("first")

    rig.tools.register(echo_tool("shout"))
    rig.agent(name="test")  # a new agent sees the new toolset
    await rig.turn("second")

    assert "Tools: echo, shout" in system_of(rig, 1)
    assert "Tools: echo\n" in system_of(rig, 0)


async def test_prefix_is_rebuilt_when_the_soul_md_file_was_edited_between_turns(
    rig: Rig, tmp_path: Path
) -> None:
    soul_md = tmp_path / "SOUL.md"
    soul_md.write_text("You are Test.", encoding="utf-8")
    rig.agent(soul="You are Test.", soul_path=soul_md)
    rig.server.script(reply_text("one"), reply_text("two"))
    await rig.turn("first")

    soul_md.write_text("You are Test, edited on disk.", encoding="utf-8")
    later = soul_md.stat().st_mtime_ns + 1_000_000_000  # a distinct mtime, however fast
    os.utime(soul_md, ns=(later, later))
    await rig.turn("second")

    assert system_of(rig, 0).startswith("You are Test.\n\n## Session")
    assert system_of(rig, 1).startswith("You are Test, edited on disk.\n\n## Session")


def test_fingerprint_changes_with_model_tools_soul_profile_and_workspace() -> None:
    base = Runtime("m", ("a", "b"), "soul")
    assert base.fingerprint() != Runtime("m", ("a", "b"), "soul", profile="p").fingerprint()
    assert base.fingerprint() != Runtime("m", ("a", "b"), "soul", workspace="/w").fingerprint()

    assert base.fingerprint() == Runtime("m", ("b", "a"), "soul").fingerprint()
    assert base.fingerprint() != Runtime("m2", ("a", "b"), "soul").fingerprint()
    assert base.fingerprint() != Runtime("m", ("a",), "soul").fingerprint()
    assert base.fingerprint() != Runtime("m", ("a", "b"), "soul!").fingerprint()
