"""The "always for this session" memory: exact matches only, per session, bounded."""

from __future__ import annotations

from typing import Any

from core.approval_memory import ApprovalMemory
from core.approver import ApprovalRequest


def request(
    session_key: str, arguments: dict[str, Any], tool: str = "terminal", session_id: str = "s"
) -> ApprovalRequest:
    return ApprovalRequest(
        id="r", kind="approval", session_key=session_key, session_id=session_id, turn_id="t",
        call_id="c", tool=tool, arguments=arguments, prompt="run it?", requested_by="42",
        created_at=0.0, timeout=1.0,
    )  # fmt: skip


def test_a_remembered_command_matches_with_other_spacing_but_never_as_a_prefix() -> None:
    memory = ApprovalMemory()
    memory.remember(request("k", {"command": "rm -rf build"}))

    assert memory.approves(request("k", {"command": "  rm   -rf\tbuild "}))
    assert not memory.approves(request("k", {"command": "rm -rf build /"}))
    assert not memory.approves(request("k", {"command": "rm -rf build"}, tool="other"))
    assert not memory.approves(request("other", {"command": "rm -rf build"}))


def test_arguments_without_a_command_match_as_canonical_json() -> None:
    memory = ApprovalMemory()
    memory.remember(request("k", {"path": "a.txt", "mode": "w"}))

    assert memory.approves(request("k", {"mode": "w", "path": "a.txt"}))
    assert not memory.approves(request("k", {"mode": "a", "path": "a.txt"}))


def test_the_least_recently_used_session_is_forgotten_past_the_cap() -> None:
    memory = ApprovalMemory(max_sessions=2)
    memory.remember(request("old", {"command": "ls"}))
    memory.remember(request("used", {"command": "ls"}))
    assert memory.approves(request("old", {"command": "ls"}))  # "old" is now the recent one
    memory.remember(request("new", {"command": "ls"}))

    assert not memory.approves(request("used", {"command": "ls"}))
    assert memory.approves(request("old", {"command": "ls"}))
    assert memory.approves(request("new", {"command": "ls"}))


def test_a_session_remembers_at_most_its_cap_and_forget_drops_it() -> None:
    memory = ApprovalMemory(max_per_session=2)
    for command in ("a", "b", "c"):
        memory.remember(request("k", {"command": command}))

    assert [memory.approves(request("k", {"command": c})) for c in "abc"] == [True, True, False]
    memory.forget("k")
    assert not memory.approves(request("k", {"command": "a"}))


def test_a_new_session_under_the_key_remembers_nothing_of_the_old_ones() -> None:
    """A ``/new`` this process never saw (run on another process of a cluster) still ends
    the old session's "always": the next request names the new session's id."""
    memory = ApprovalMemory()
    memory.remember(request("k", {"command": "rm -rf build"}, session_id="old"))

    assert memory.approves(request("k", {"command": "rm -rf build"}, session_id="old"))
    assert not memory.approves(request("k", {"command": "rm -rf build"}, session_id="new"))
    memory.remember(request("k", {"command": "ls"}, session_id="new"))
    assert memory.approves(request("k", {"command": "ls"}, session_id="new"))
    assert not memory.approves(request("k", {"command": "rm -rf build"}, session_id="new"))
