"""A turn whose session lease another process took over (docs/cluster.md).

Its store writes are refused as ``Fenced``: the turn ends ``failed`` and the loop says so
once, at WARNING, naming the lease, without a traceback — never as a crash
(:mod:`core.agent.lease_lost`). Any other store error keeps its ERROR line.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.store.base import StoreError
from core.store.connection import open_connection
from core.store.fencing import Fence, Fenced
from core.store.sqlite import SqliteStore, _Written
from core.store.statements import Statement
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import KEY, Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call

LEASE = Fence(f"session:{KEY}", "node-b", 7)


class RefusingStore(SqliteStore):
    """A real SQLite store whose writes, after the first ``n`` from :meth:`refuse_after`,
    raise what ``refusal`` makes (as the PostgreSQL store does once the lease is gone)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allowed: int | None = None
        self.refusal: Callable[[], Exception] = lambda: Fenced(LEASE)

    def refuse_after(self, n: int) -> None:
        self.allowed = n

    async def _write(self, sql: str, params: Any, doing: str, *, one: bool = False) -> _Written:
        self._spend()
        return await super()._write(sql, params, doing, one=one)

    async def _write_each(self, statements: Sequence[Statement]) -> None:
        self._spend()  # one transaction (a turn's close with its session's touch): one write
        await super()._write_each(statements)

    def _spend(self) -> None:
        if self.allowed is not None:
            if self.allowed <= 0:
                raise self.refusal()
            self.allowed -= 1


@pytest.fixture
async def refusing(rig: Rig, tmp_path: Path) -> AsyncIterator[RefusingStore]:
    path = tmp_path / "refusing.db"
    store = RefusingStore(await open_connection(path), path)
    rig.store = store  # the agent is built on first use, on this store
    try:
        yield store
    finally:
        await store.close()


def loop_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("core.agent")]


def taken_over_by(store: RefusingStore) -> Any:
    async def take_over(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        store.refuse_after(0)  # another process took the session: every write from now on
        return ToolResult("done")

    return make_tool("take_over", take_over)


async def test_a_turn_fenced_mid_loop_logs_one_warning_naming_the_lease_and_no_crash(
    rig: Rig, refusing: RefusingStore, caplog: pytest.LogCaptureFixture
) -> None:
    rig.tools.register(taken_over_by(refusing))
    rig.server.script(reply_tool_call("take_over", {}), reply_text("never stored"))

    with caplog.at_level(logging.INFO, logger="core.agent"):
        result = await rig.turn("go")

    assert result.status == "failed" and result.error is not None and "Fenced" in result.error
    lines = loop_lines(caplog)
    assert [r.levelname for r in lines if r.levelno >= logging.WARNING] == ["WARNING"]
    (warning,) = [r for r in lines if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert f"turn {result.turn_id} stopped" in text and f"lease session:{KEY}" in text
    assert "epoch 7" in text and warning.exc_info is None
    assert "crashed" not in caplog.text and "final status not stored" not in caplog.text


async def test_a_turn_fenced_before_it_opens_logs_one_warning_and_no_crash(
    rig: Rig, refusing: RefusingStore, caplog: pytest.LogCaptureFixture
) -> None:
    refusing.refuse_after(0)

    with caplog.at_level(logging.INFO, logger="core.agent"):
        result = await rig.turn("hello")

    assert result.status == "failed"
    lines = [r for r in loop_lines(caplog) if r.levelno >= logging.WARNING]
    assert [(r.levelname, r.exc_info) for r in lines] == [("WARNING", None)]
    assert f"turn of {KEY} stopped: lease session:{KEY}" in lines[0].getMessage()
    assert "could not start" not in caplog.text


async def test_any_other_refused_write_is_still_an_error_with_its_traceback(
    rig: Rig, refusing: RefusingStore, caplog: pytest.LogCaptureFixture
) -> None:
    refusing.refusal = lambda: StoreError("disk full")
    rig.tools.register(taken_over_by(refusing))
    rig.server.script(reply_tool_call("take_over", {}), reply_text("never stored"))

    with caplog.at_level(logging.INFO, logger="core.agent"):
        result = await rig.turn("go")

    assert result.status == "failed"
    errors = [r for r in loop_lines(caplog) if r.levelno >= logging.ERROR]
    messages = [r.getMessage() for r in errors]
    assert f"turn {result.turn_id} crashed" in messages
    assert f"turn {result.turn_id}: final status not stored" in messages
    assert all(r.exc_info is not None for r in errors)
    assert not [r for r in loop_lines(caplog) if r.levelno == logging.WARNING]
