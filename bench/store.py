"""Store: ``append_message`` throughput and ``load_active_messages`` of a long session."""

from __future__ import annotations

from bench.figures import Row, print_table, sample
from bench.rig import scratch_store
from bench.sizes import Sizes
from core.store.sqlite import SqliteStore
from core.types import ChatMessage

TURN_ID = "bench-turn"


async def run(sizes: Sizes) -> None:
    async with scratch_store() as store:
        rows = [await _appends(store, sizes), await _loads(store, sizes)]
    notes = ["SQLite file in a temporary directory, WAL; appends awaited one at a time"]
    print_table("store (SqliteStore)", rows, notes)


async def _session(store: SqliteStore, key: str) -> str:
    session = await store.create_session(key, "bench")
    await store.start_turn(session.id, f"{TURN_ID}:{key}")
    return session.id


def _message(index: int) -> ChatMessage:
    text = f"message {index}: " + "lorem ipsum " * 8
    if index % 2 == 0:
        return ChatMessage(role="user", content=text)
    return ChatMessage(role="assistant", content=text)


async def _appends(store: SqliteStore, sizes: Sizes) -> Row:
    session_id = await _session(store, "bench:append")

    async def append(index: int) -> None:
        await store.append_message(session_id, f"{TURN_ID}:bench:append", _message(index))

    traced = max(10, sizes.appends // 20)
    return await sample("append_message", append, sizes.appends, traced=traced, unit="msg")


async def _loads(store: SqliteStore, sizes: Sizes) -> Row:
    session_id = await _session(store, "bench:load")
    for index in range(sizes.history):
        await store.append_message(session_id, f"{TURN_ID}:bench:load", _message(index))

    async def load(index: int) -> None:
        found = await store.load_active_messages(session_id)
        if len(found) != sizes.history:
            raise RuntimeError(f"load {index}: {len(found)} of {sizes.history} messages")

    what = f"load_active_messages ({sizes.history} msgs)"
    return await sample(what, load, sizes.loads, traced=2, unit="load")
