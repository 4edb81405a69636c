"""``commonos usage [--since DATE]`` on a real store file (README "Usage and quotas"),
through the command line's own ``main``: everyone's totals and the top people, chats,
profiles and models since the date; a bad date is one readable line and exit 1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.store.sqlite import open_store
from core.store.usage import UsageBook, UsageRow
from tests.test_cli_inbox import db_path
from tests.test_cli_jobs import commonos

JAN_15 = 1_800_000_000.0  # 2027-01-15 08:00 UTC
DEC_31 = JAN_15 - 15 * 86_400


def row(at: float, person: str, chat: str, prompt: int, out: int, cost: float) -> UsageRow:
    return UsageRow(
        at=at, person=person, chat=chat, profile="default", model="cheap", session_key=chat,
        turn_id="t", prompt_tokens=prompt, cached_tokens=prompt // 2, completion_tokens=out,
        estimated=False, cost=cost,
    )  # fmt: skip


async def seed(path: Path) -> None:
    store = await open_store(path)
    try:
        book = UsageBook(store)
        await book.add(row(DEC_31, "telegram:1", "telegram:dm:1", 9000, 900, 1.0))
        await book.add(row(JAN_15, "telegram:1", "telegram:dm:1", 100, 10, 0.25))
        await book.add(row(JAN_15, "discord:7", "discord:guild:5:c:6", 1000, 100, 0.5))
    finally:
        await store.close()


def test_usage_since_a_date_and_a_bad_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(seed(db_path(tmp_path)))
    code, out, err = commonos(tmp_path, capsys, "usage", "--since", "2027-01-01")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "Model usage since 2027-01-01 00:00 UTC",
        "Everyone: 1,210 tokens (1,100 in, 550 cached, 110 out), cost 0.7500, 2 calls",
        "",
        "Top people:",
        "1. discord:7: 1,100 tokens, cost 0.5000",
        "2. telegram:1: 110 tokens, cost 0.2500",
        "",
        "Top chats:",
        "1. discord:guild:5:c:6: 1,100 tokens, cost 0.5000",
        "2. telegram:dm:1: 110 tokens, cost 0.2500",
        "",
        "By profile:",
        "1. default: 1,210 tokens, cost 0.7500",
        "",
        "By model:",
        "1. cheap: 1,210 tokens, cost 0.7500",
    ]
    code, out, err = commonos(tmp_path, capsys, "usage", "--since", "2026-12-01")
    assert code == 0
    assert "Everyone: 11,110 tokens" in out
    assert "1. telegram:1: 10,010 tokens, cost 1.2500" in out

    code, out, err = commonos(tmp_path, capsys, "usage", "--since", "last tuesday")
    assert (code, out) == (1, "")
    assert err == (
        "commonos: --since 'last tuesday' is not a date (expected YYYY-MM-DD, e.g. 2027-01-01)\n"
    )


def test_usage_without_a_store_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = db_path(tmp_path)
    code, out, err = commonos(tmp_path, capsys, "usage")
    assert (code, out) == (1, "")
    assert err == f"commonos: no store at {path} yet (nothing recorded)\n"
    assert not path.exists()
