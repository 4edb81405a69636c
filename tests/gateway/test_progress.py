"""ProgressView: one message edited in place, paced, coalesced, never losing its last state."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from adapters.base import (
    Button,
    ButtonRows,
    ChatRef,
    Forbidden,
    MessageGone,
    NotModified,
    RateLimited,
)
from core.redaction import remember_secrets
from gateway.outbound.pipeline import Outbound
from gateway.turns.progress import ProgressConfig, ProgressView
from tests.gateway.fakes import FakeAdapter, FakeClock

CHAT = ChatRef("fake", "100")


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "result": "ok"}


def make(mode: str = "all", cleanup: bool = False) -> tuple[FakeAdapter, FakeClock, ProgressView]:
    clock = FakeClock()
    adapter = FakeAdapter(clock=clock)
    config = ProgressConfig(mode=mode, cleanup=cleanup)  # type: ignore[arg-type]
    return (
        adapter,
        clock,
        ProgressView(Outbound(adapter), CHAT, config, clock=clock, sleep=clock.sleep),
    )


def writes(adapter: FakeAdapter) -> list[str]:
    return [c.method for c in adapter.calls if c.method in ("send", "edit")]


async def test_progress_is_one_message_edited_in_place() -> None:
    adapter, _, view = make()
    view.step(2, [tool("terminal", command="ls -la")])
    await adapter.wait_for(lambda: len(adapter.of("send")) == 1)
    view.step(3, [tool("read_file", path="notes.txt")])
    await view.finish("completed")
    assert writes(adapter) == ["send", "edit"]
    assert {c.message for c in adapter.of("edit")} == {adapter.of("send")[0].message}
    assert adapter.of("edit")[-1].text == (
        "💻 terminal: ls -la\n📖 read_file: notes.txt\n✅ Done — 2 steps"
    )


async def test_edits_are_never_closer_than_the_edit_interval() -> None:
    adapter, clock, view = make()
    for i in range(8):
        view.step(i + 2, [tool("terminal", command=f"echo {i}")])
        await adapter.wait_for(shown(adapter, f"echo {i}"))
        clock.now += 0.3
    await view.finish("completed")
    times = [c.at for c in adapter.calls if c.method in ("send", "edit")]
    assert len(times) == 9
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(times))
    assert clock.sleeps and all(0 < s <= 1.0 for s in clock.sleeps)


def shown(adapter: FakeAdapter, line: str) -> Callable[[], bool]:
    return lambda: any(line in c.text for c in adapter.calls if c.method in ("send", "edit"))


class HeldSleep:
    """A sleeper that returns only when the test releases it (time stands still)."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.waiting.set()
        await self.release.wait()


async def test_a_burst_of_steps_coalesces_into_the_latest_state() -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    held = HeldSleep()
    view = ProgressView(
        Outbound(adapter), CHAT, ProgressConfig(mode="all"), clock=clock, sleep=held
    )
    view.step(2, [tool("terminal", command="first")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    for i in range(10):
        view.step(i + 3, [tool("search", query=f"q{i}")])
        await asyncio.sleep(0)  # let the flush task run between steps
    await asyncio.wait_for(held.waiting.wait(), 5)
    assert writes(adapter) == ["send"]
    held.release.set()
    await adapter.wait_for(lambda: bool(adapter.of("edit")))
    await view.finish("completed")
    assert writes(adapter) == ["send", "edit", "edit"]
    assert adapter.of("edit")[0].text.endswith("🔍 search: q9")
    assert adapter.of("edit")[1].text.endswith("🔍 search: q9\n✅ Done — 11 steps")


async def test_rate_limited_edit_waits_and_still_shows_the_final_state() -> None:
    adapter, clock, view = make()
    view.step(2, [tool("terminal", command="a")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    adapter.fail("edit", RateLimited(7.0), RateLimited(3.0))
    view.step(3, [tool("terminal", command="b")])
    await view.finish("completed")
    assert 7.0 in clock.sleeps and 3.0 in clock.sleeps
    assert adapter.of("edit")[-1].text.endswith("✅ Done — 2 steps")
    assert len(adapter.of("edit")) == 3


async def test_not_modified_is_not_an_error_and_editing_goes_on() -> None:
    adapter, _, view = make()
    view.step(2, [tool("terminal", command="a")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    adapter.fail("edit", NotModified("same"))
    view.step(3, [tool("terminal", command="b")])
    await adapter.wait_for(lambda: len(adapter.of("edit")) == 1)
    view.step(4, [tool("terminal", command="c")])
    await view.finish("completed")
    assert adapter.of("edit")[-1].text.endswith("💻 terminal: c\n✅ Done — 3 steps")


async def test_a_failing_edit_stops_editing_without_raising() -> None:
    adapter, _, view = make()
    view.step(2, [tool("terminal", command="a")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    adapter.fail("edit", MessageGone("deleted by a user"))
    view.step(3, [tool("terminal", command="b")])
    await adapter.wait_for(lambda: len(adapter.of("edit")) == 1)
    view.step(4, [tool("terminal", command="c")])
    await view.finish("completed")
    assert len(adapter.of("edit")) == 1


async def test_a_failing_first_send_leaves_the_turn_alone() -> None:
    adapter, _, view = make()
    adapter.fail("send", Forbidden("blocked"))
    view.step(2, [tool("terminal", command="a")])
    await view.finish("completed")
    assert writes(adapter) == ["send"]


async def test_mode_new_counts_repeats_of_one_tool_on_its_line() -> None:
    adapter, _, view = make(mode="new")
    view.step(2, [tool("terminal", command="a"), tool("terminal", command="b")])
    view.step(3, [tool("terminal", command="c")])
    view.step(4, [tool("read_file", path="x")])
    view.step(5, [tool("terminal", command="d")])
    await view.finish("completed")
    assert adapter.of("send")[0].text == (
        "💻 terminal: c (×3)\n📖 read_file: x\n💻 terminal: d\n✅ Done — 5 steps"
    )


async def test_mode_all_collapses_identical_consecutive_lines() -> None:
    adapter, _, view = make(mode="all")
    view.step(2, [tool("terminal", command="make")] * 3)
    await view.finish("completed")
    assert adapter.of("send")[0].text == "💻 terminal: make (×3)\n✅ Done — 3 steps"


async def test_mode_off_sends_nothing() -> None:
    adapter, _, view = make(mode="off")
    view.step(2, [tool("terminal", command="a")])
    await view.finish("completed")
    assert adapter.calls == []


async def test_cleanup_deletes_the_progress_message_when_the_reply_is_sent() -> None:
    adapter, _, view = make(cleanup=True)
    view.step(2, [tool("terminal", command="a")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    await view.finish("completed")
    assert [c.method for c in adapter.calls] == ["send", "delete"]


async def test_previews_are_short_and_redact_secrets() -> None:
    adapter, _, view = make()
    remember_secrets(["abc123-progress-secret"])
    command = "curl -H 'Bearer abc123-progress-secret' https://example.com/" + "x" * 80
    view.step(2, [tool("terminal", command=command)])
    await view.finish("completed")
    line = adapter.of("send")[0].text.split("\n")[0]
    assert "abc123" not in line and "'Bearer ***'" in line
    assert len(line.removeprefix("💻 terminal: ")) <= 40


async def test_interrupted_turn_finalizes_as_stopped() -> None:
    adapter, _, view = make()
    view.step(2, [tool("terminal", command="sleep 100")])
    await view.finish("interrupted")
    assert adapter.of("send")[0].text.endswith("⏹ Stopped — 1 step")


def with_stop_button(made: list[int]) -> tuple[FakeAdapter, FakeClock, ProgressView]:
    """A view whose turn's Stop button counts into ``made`` each time it is made."""

    def buttons() -> ButtonRows:
        made.append(1)
        return ((Button("⏹ Stop", "st:turn-1", role="stop"),),)

    clock = FakeClock()
    adapter = FakeAdapter(clock=clock)
    config = ProgressConfig(mode="all")
    view = ProgressView(
        Outbound(adapter), CHAT, config, clock=clock, sleep=clock.sleep, buttons=buttons
    )
    return adapter, clock, view


async def test_the_turns_buttons_are_made_once_at_the_first_write_and_kept_until_the_end() -> None:
    made: list[int] = []
    adapter, clock, view = with_stop_button(made)
    assert made == []  # nothing written yet: no button made
    view.step(2, [tool("terminal", command="ls")])
    await adapter.wait_for(lambda: len(adapter.of("send")) == 1)
    clock.now += 5
    view.step(3, [tool("terminal", command="pwd")])
    await adapter.wait_for(lambda: len(adapter.of("edit")) == 1)
    await view.finish("completed")
    payloads = [[b.data for row in c.buttons for b in row] for c in adapter.calls]
    assert payloads == [["st:turn-1"], ["st:turn-1"], []]  # the final state has none
    assert made == [1]


async def test_a_turn_that_shows_no_progress_makes_no_buttons() -> None:
    made: list[int] = []
    adapter, _, view = with_stop_button(made)
    await view.finish("completed")
    assert adapter.calls == [] and made == []


async def test_aclose_cancels_a_flush_waiting_out_a_rate_limit() -> None:
    adapter, _, view = make()
    gate_sleeps: list[float] = []

    async def never(seconds: float) -> None:
        gate_sleeps.append(seconds)
        await asyncio.Event().wait()

    view = ProgressView(Outbound(adapter), CHAT, ProgressConfig(mode="all"), sleep=never)
    adapter.fail("send", RateLimited(30.0))
    view.step(2, [tool("terminal", command="a")])
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    await view.aclose()
    assert gate_sleeps == [30.0]


async def test_finish_gives_up_a_final_write_stuck_in_a_rate_limit_wait() -> None:
    adapter = FakeAdapter()
    waiting, given_up = asyncio.Event(), asyncio.Event()

    async def flood_wait(seconds: float) -> None:
        waiting.set()
        try:
            await asyncio.Event().wait()  # a 429 wait far longer than the time box
        except asyncio.CancelledError:
            given_up.set()
            raise

    config = ProgressConfig(mode="all")
    view = ProgressView(Outbound(adapter), CHAT, config, sleep=flood_wait, finish_timeout=0.05)
    adapter.fail("send", RateLimited(50.0))
    view.step(2, [tool("terminal", command="a")])
    await asyncio.wait_for(waiting.wait(), 5)
    async with asyncio.timeout(5):
        await view.finish("completed")
    assert given_up.is_set()
