"""``commonos memory export PERSON`` and ``commonos memory add --profile`` as a real
process on a real store file (README "Memory"): a person's export holds their linked
identities' entries and nobody else's; a profile entry is written by the operator only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.store.memory import memory_store
from core.store.sqlite import open_store
from gateway.cli.memory import MemoryProblem, add
from gateway.config import load_config
from tests.test_cli_inbox import commonos, db_path


async def seed(path: Path) -> None:
    store = await open_store(path)
    try:
        await store.link_identity("telegram", "42", "alice")
        await store.link_identity("discord", "7", "alice")
        memory = memory_store(store)
        await memory.add_memory("person:telegram:42", "Alice's cat is Mochi")
        await memory.add_memory("person:discord:7", "Alice plays the cello")
        await memory.add_memory("person:telegram:99", "Bob's secret")
        await memory.add_memory("chat:telegram:group:-100", "The group meets Fridays")
        await memory.set_memory_setting("discord:7", "share", "chat:discord:channel:5", on=True)
    finally:
        await store.close()


async def test_export_holds_the_persons_linked_entries_and_nobody_elses(tmp_path: Path) -> None:
    await seed(db_path(tmp_path))
    code, out, err = await commonos(tmp_path, "memory", "export", "discord:7")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["identities"] == ["discord:7", "telegram:42"]
    assert [(e["identity"], e["text"]) for e in document["entries"]] == [
        ("telegram:42", "Alice's cat is Mochi"),
        ("discord:7", "Alice plays the cello"),
    ]
    assert document["settings"] == [
        {"identity": "discord:7", "setting": "share", "chat": "chat:discord:channel:5"}
    ]
    assert "Bob" not in out and "Fridays" not in out


async def test_add_writes_a_profile_entry_and_refuses_an_unknown_profile(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    config = load_config(tmp_path / "config.toml", env={})
    store = await open_store(path)
    try:
        with pytest.raises(MemoryProblem, match=r"no profile 'nope' \(configured: default\)"):
            await add(store, config, "nope", "x")
        said = await add(store, config, "default", "Office hours  are 9-17")
        assert said == "saved #1 for every session of profile default"
        again = await add(store, config, "default", "office hours are 9-17")
        assert again == "already remembered for profile default; not saved twice"
        entries = await memory_store(store).memories_of(["profile:default"], 10)
        assert [e.text for e in entries] == ["Office hours are 9-17"]
    finally:
        await store.close()
