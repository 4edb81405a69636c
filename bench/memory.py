"""``python -m bench memory``: what memory and skills cost (issue 32, README "Memory",
"Skills").

* **Prompt tokens at the caps.** The context tier's memory section for a person holding
  ``max_entries_per_scope`` (200) entries of ``max_entry_chars`` (1,000) and of a typical
  80 characters, under ``prompt_tokens`` = 1,500; the stable tier's skills list for 200
  skills with descriptions of the longest allowed 1,024 characters and of a typical 120,
  under ``prompt_chars`` = 4,000. Tokens estimated as the engine does (UTF-8 bytes / 4).
* **memory_search latency** over 100,000 entries (1,000 owners × 100) on SQLite (FTS5) and
  PostgreSQL (``tsvector`` + GIN), searched as a viewer in a shared chat sees it (a
  person, a chat, the profile): a query of rare words (a handful of matches in the whole
  table) and one with a common word (a match in a fifth of all entries). p50/p99 in ms.
  Entries are bulk-loaded with the store's own insert statement; each search is the
  store's ``search_memory`` (found entries are also counted as used, a write).

Measured here (2 shared cores): memory section 1,337 tokens (5 entries of 1,000 chars) and
1,456 (47 of 80) under 1,500; skills list 816 (3 of 1,024-char descriptions) and 1,009 (29
of 120) under 4,000 chars. memory_search p50/p99: SQLite 0.78/1.92 ms (rare words),
21.98/35.56 ms (a common word: FTS5 ranks all 20,000 matches before the owner filter);
PostgreSQL 6.80/9.88 and 12.60/17.88 ms.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.figures import percentile, print_grid
from bench.sizes import Sizes
from core.memory.rendering import memory_section, tokens
from core.skills.catalog import Skill
from core.skills.index import skills_index
from core.store import memory_tables as m
from core.store.memory import MemoryEntry, MemoryStore, memory_store

ENTRIES = 100_000
OWNERS = 1_000
SEARCHES = 500
QUICK_SEARCHES = 100
WORDS = [f"w{n:04}" for n in range(5_000)]
COMMON = "often"
"""In a fifth of all entries."""
RARE = "zephyr quokka"
"""In 10 entries of the searched owners' (and nowhere else)."""
LOAD_BATCH = 5_000


def prompt_rows() -> list[list[str]]:
    rows = []
    for chars in (1000, 80):
        entries = [
            MemoryEntry(n, "person:telegram:42", "x" * chars, 1.7e9, 1.7e9) for n in range(200)
        ]
        section = memory_section(entries, 1500)
        shown = section.count("\n- #")
        rows.append([f"memory, 200 entries of {chars} chars", str(tokens(section)), f"{shown}"])
    for chars in (1024, 120):
        skills = [Skill(f"skill-{n:03}", "d" * chars, Path("/x")) for n in range(200)]
        index = skills_index(skills, 4000)
        shown = index.count("\n- skill-")
        rows.append([f"skills, 200 with {chars}-char descriptions", str(tokens(index)), f"{shown}"])
    return rows


def text_of(rng: random.Random, index: int) -> str:
    words = rng.sample(WORDS, 12)
    if rng.random() < 0.2:
        words.append(COMMON)
    return " ".join(words) + f" n{index}"


def owner_of(index: int) -> str:
    kind = "person:telegram:" if index % 2 else "chat:telegram:group:"
    return f"{kind}{index % OWNERS}"


def rows_to_load() -> list[tuple[str, str, str, float, float]]:
    rng = random.Random(32)
    rows = []
    for index in range(ENTRIES):
        text = text_of(rng, index)
        if index % OWNERS in (1, 2) and index < 10 * OWNERS:
            text += f" {RARE}"
        rows.append((owner_of(index), text, m.digest(text), 1.7e9 + index, 1.7e9 + index))
    return rows


async def load_sqlite(store: Any, rows: list[tuple[str, str, str, float, float]]) -> None:
    sql = m.ADD.split(" RETURNING")[0]
    for start in range(0, len(rows), LOAD_BATCH):
        await store._conn.executemany(sql, rows[start : start + LOAD_BATCH])
        await store._conn.commit()


async def load_pg(store: Any, rows: list[tuple[str, str, str, float, float]]) -> None:
    async with store.pool.acquire() as connection:
        await connection.copy_records_to_table(
            "memory_entries",
            records=[(*row, 0) for row in rows],
            columns=["owner", "text", "digest", "created_at", "used_at", "uses"],
        )
        await connection.execute("ANALYZE memory_entries")


async def search_times(memory: MemoryStore, query: str, n: int) -> tuple[list[float], int]:
    owners = ["person:telegram:1", "chat:telegram:group:2", "profile:default"]
    latencies, found = [], 0
    for _ in range(n):
        began = time.perf_counter()
        found = len(await memory.search_memory(owners, query, 10))
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies, found


async def search_rows(name: str, memory: MemoryStore, n: int) -> list[list[str]]:
    rows = []
    for label, query in (("rare words", RARE), ("a common word", f"{COMMON} w0001")):
        await search_times(memory, query, 10)  # warm-up
        latencies, found = await search_times(memory, query, n)
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        rows.append([f"{name}: {label}", str(n), f"{p50:.2f}", f"{p99:.2f}", str(found)])
    return rows


async def sqlite_rows(rows: list[tuple[str, str, str, float, float]], n: int) -> list[list[str]]:
    from core.store.sqlite import open_store

    with tempfile.TemporaryDirectory() as directory:
        store = await open_store(Path(directory) / "bench.db")
        try:
            await load_sqlite(store, rows)
            return await search_rows("SQLite FTS5", memory_store(store), n)
        finally:
            await store.close()


async def pg_rows(rows: list[tuple[str, str, str, float, float]], n: int) -> list[list[str]]:
    from core.store.postgres import open_pg_store
    from tests.support.postgres import running_postgres

    async with running_postgres("bench-memory") as server:
        name = await server.create_database("memory")
        store = await open_pg_store(server.url(name), process_id="bench", pool_size=2)
        try:
            await load_pg(store, rows)
            return await search_rows("PostgreSQL tsvector", memory_store(store), n)
        finally:
            await store.close()


async def run(sizes: Sizes) -> None:
    header = ("case", "tokens", "lines shown")
    print_grid("memory and skills: prompt tokens at their caps", header, prompt_rows())
    n = QUICK_SEARCHES if sizes.turns < 100 else SEARCHES
    rows = rows_to_load()
    found = await sqlite_rows(rows, n) + await pg_rows(rows, n)
    print_grid(
        f"memory_search over {ENTRIES:,} entries ({OWNERS} owners), a shared chat's viewer",
        ("case", "n", "p50 ms", "p99 ms", "found"),
        found,
    )
