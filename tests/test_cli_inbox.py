"""``commonos inbox dead`` lists dead letters and ``commonos inbox drop ID`` removes one,
run as a real process against a real store file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from core.store.base import DeadLetter
from core.store.sqlite import open_store
from gateway.config import load_config

TIMEOUT = 30.0
SECRETS = ("API_KEY", "TOKEN", "PROXY")
LONG_TEXT = "a very long message " * 50


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not any(s in k.upper() for s in SECRETS)}
    return {**env, "COMMONOS_HOME": str(home)}


async def commonos(home: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=clean_env(home), cwd=home,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def db_path(home: Path) -> Path:
    (home / "config.toml").write_text(f'[gateway]\ndata_dir = "{home / "data"}"\n')
    return load_config(home / "config.toml").gateway.db_path


async def seed(path: Path) -> list[DeadLetter]:
    store = await open_store(path)
    try:
        raw = json.dumps({"update_id": 17, "message": {"text": LONG_TEXT}})
        await store.add_dead_letter(
            DeadLetter("telegram", "17", raw, "KeyError: 'date'", 1, 1_700_000_000.0)
        )
        await store.add_dead_letter(
            DeadLetter("telegram", "18", '{"update_id": 18}', "unknown update type", 1, 1.7e9)
        )
        return await store.list_dead_letters()
    finally:
        await store.close()


async def test_inbox_dead_lists_each_dead_letter_on_one_truncated_line(tmp_path: Path) -> None:
    first, second = await seed(db_path(tmp_path))
    code, out, err = await commonos(tmp_path, "inbox", "dead")
    assert (code, err) == (0, "")
    header, one, two = out.splitlines()
    assert header.startswith("ID  PLATFORM  WHEN")
    assert one.startswith(f"{first.id}  telegram  2023-11-14 22:13:20Z  17  KeyError: 'date'  |  ")
    assert '{"update_id": 17, "message": {"text": "a very long' in one and one.endswith("…")
    assert len(one) < 250 and LONG_TEXT not in one
    assert two.startswith(f"{second.id}  telegram  ") and "unknown update type" in two


async def test_inbox_dead_with_none_says_so(tmp_path: Path) -> None:
    db_path(tmp_path)
    assert await commonos(tmp_path, "inbox", "dead") == (0, "no dead letters\n", "")


async def test_inbox_drop_removes_one_dead_letter(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    first, second = await seed(path)
    code, out, err = await commonos(tmp_path, "inbox", "drop", str(first.id))
    assert (code, out, err) == (0, f"dropped dead letter {first.id}\n", "")
    store = await open_store(path)
    try:
        assert [d.id for d in await store.list_dead_letters()] == [second.id]
    finally:
        await store.close()


async def test_inbox_drop_of_an_unknown_id_is_one_readable_line_and_exit_1(
    tmp_path: Path,
) -> None:
    await seed(db_path(tmp_path))
    for unknown in ("999", "abc"):
        code, out, err = await commonos(tmp_path, "inbox", "drop", unknown)
        assert (code, out) == (1, "")
        assert err.count("\n") == 1 and err.startswith(f"commonos: no dead letter {unknown}")
