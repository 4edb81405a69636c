"""Property: whatever JSON arrives as an update, the poll loop moves past it and the next
ordinary message still gets through (real PTB, the simulator, a real SQLite store).

Hypothesis runs in a worker thread and drives each example on the test's event loop, so
one adapter, simulator and store serve every example.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapters.telegram import TelegramAdapter
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.harness import EventLog

EXAMPLE_TIMEOUT = 10.0

EDGES = [0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**70, -(2**70), ALICE.id]
integers = st.one_of(
    st.sampled_from(EDGES), st.integers(min_value=-(2**31), max_value=2**31), st.integers()
)
scalars = st.one_of(
    st.none(), st.booleans(), integers, st.floats(allow_nan=False), st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
PATHS = (
    "message_id", "date", "chat", "chat.id", "chat.type", "from", "from.id", "from.is_bot",
    "from.first_name", "text", "entities", "entities.0", "entities.0.offset",
    "entities.0.length", "entities.0.type", "message_thread_id", "reply_to_message",
)  # fmt: skip
DELETE = object()
mutations = st.lists(
    st.tuples(
        st.sampled_from(PATHS), st.just(DELETE) | st.sampled_from(EDGES) | integers | json_values
    ),
    min_size=1,
    max_size=3,
)
kinds = st.sampled_from(["message", "message", "edited_message", "callback_query"]) | st.text(
    max_size=12
)


def valid_message() -> dict[str, Any]:
    return {
        "message_id": 1, "date": 1_700_000_000, "text": "/start@test_bot hi @test_bot",
        "chat": {"id": ALICE.id, "type": "private", "first_name": "Alice"},
        "from": ALICE.to_json(),
        "entities": [{"type": "bot_command", "offset": 0, "length": 15}],
    }  # fmt: skip


def mutated(kind: str, changes: list[tuple[str, Any]]) -> dict[str, Any]:
    """A valid DM from Alice under ``kind``, with each ``(path, value)`` applied."""
    message = valid_message()
    for path, value in changes:
        *parents, last = path.split(".")
        node: Any = message
        for part in parents:
            node = (node[0] if node else None) if isinstance(node, list) else node.get(part)
            if not isinstance(node, dict | list):
                break
        else:
            _apply(node, last, value)
    return {kind: message}


def _apply(node: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(node, list):
        if node and key.isdigit():
            node[0] = value if value is not DELETE else None
    elif value is DELETE:
        node.pop(key, None)
    else:
        node[key] = value


updates = st.one_of(
    st.builds(mutated, kinds, mutations),
    st.builds(mutated, kinds, mutations),
    st.dictionaries(st.text(max_size=12), json_values, max_size=3),
)
update_ids = st.one_of(
    st.none(),
    st.none(),
    st.integers(max_value=-1) | st.integers(min_value=2**63),
    json_values.filter(lambda value: not isinstance(value, int)),
)
"""None: the simulator's own next id (most updates); otherwise an id that cannot be one.
(A plausible id is Telegram's to assign and is trusted: one far ahead of the real ones
would move the offset past them — a property of the protocol, not of our loop.)"""


async def test_the_poll_loop_always_moves_past_any_update(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    loop = asyncio.get_running_loop()
    telegram_sim.chat(ALICE.id)
    canaries = itertools.count()

    async def one_example(fields: dict[str, Any], update_id: Any) -> None:
        poison = await telegram_sim.push_raw(fields, update_id=update_id)
        canary = f"canary {next(canaries)}"
        said = await telegram_sim.user_says(ALICE.id, canary)
        await telegram_sim.wait_for(
            lambda: (
                telegram_sim.is_confirmed(poison.update_id)
                and telegram_sim.is_confirmed(int(said.event_id or 0))
            ),
            timeout=EXAMPLE_TIMEOUT,
        )
        await events.wait_for(lambda: any(e.text == canary for e in events.events))

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fields=updates, update_id=update_ids)
    @example(fields=mutated("message", [("date", 2**70)]), update_id=None)
    @example(fields=mutated("message", [("chat.id", 2**70)]), update_id=None)
    @example(fields=mutated("message", [("from", DELETE)]), update_id=2**70)
    @example(fields=mutated("message", [("text", [1])]), update_id=None)
    @example(fields={"future_kind": {"a": 1}}, update_id="17")
    def moves_past(fields: dict[str, Any], update_id: Any) -> None:
        future = asyncio.run_coroutine_threadsafe(one_example(fields, update_id), loop)
        future.result(timeout=EXAMPLE_TIMEOUT * 2)

    await asyncio.to_thread(moves_past)
    await adapter.drain()
    assert await store.unfinished_inbound("telegram") == []
