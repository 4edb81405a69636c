"""The dashboard shows model usage as totals — today, this month, by profile and by model —
and never who spent it (README "Usage and quotas"): the gateway composed by the wiring,
the dashboard's state over real HTTP (SSE)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from core.store.sqlite import SqliteStore
from core.store.usage import UsageBook, UsageRow
from tests.web.test_dashboard_memory import first_state

PERSON, CHAT = "telegram:424242", "telegram:group:-100777"


def row(at: float, profile: str, model: str, prompt: int, cost: float | None) -> UsageRow:
    return UsageRow(
        at=at, person=PERSON, chat=CHAT, profile=profile, model=model, session_key=CHAT,
        turn_id="t", prompt_tokens=prompt, cached_tokens=10, completion_tokens=5,
        estimated=False, cost=cost,
    )  # fmt: skip


async def test_the_dashboard_shows_usage_totals_by_profile_and_model_and_no_person(
    tmp_path: Path, store: SqliteStore
) -> None:
    book, now = UsageBook(store), time.time()
    await book.add(row(now, "default", "cheap", 100, 0.25))
    await book.add(row(now, "default", "smart", 200, 1.5))
    await book.add(row(now, "coder", "smart", 300, None))
    await book.add(row(now - 40 * 86_400, "default", "cheap", 9_000, 9.0))  # an older month
    state = await first_state(tmp_path, store, {})
    usage = state["usage"]
    month = {"calls": 3, "tokens": 615, "prompt": 600, "cached": 30, "completion": 15,
             "cost": 1.75}  # fmt: skip
    assert usage["today"] == usage["month"] == month
    assert usage["profiles"] == {
        "default": {"calls": 2, "tokens": 310, "prompt": 300, "cached": 20, "completion": 10,
                    "cost": 1.75},
        "coder": {"calls": 1, "tokens": 305, "prompt": 300, "cached": 10, "completion": 5,
                  "cost": 0.0},
    }  # fmt: skip
    assert usage["models"]["smart"]["tokens"] == 510
    assert usage["models"]["cheap"]["tokens"] == 105
    shown = json.dumps(state)
    assert "424242" not in shown and "-100777" not in shown
