"""``commonos inbox dead`` and ``commonos inbox drop ID``: the operator's view of the
inbound items every platform's inbox quarantined (:mod:`adapters.inbox`).

Both open the configured store file directly; they can run while the gateway runs (SQLite
in WAL mode lets a second process read and make a small write).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from adapters.inbox import preview
from core.store.base import DeadLetter, Store

ERROR_WIDTH = 60
RAW_WIDTH = 80
HEADER = "ID  PLATFORM  WHEN (UTC)  ITEM  ERROR  |  RAW"


async def _open(path: Path) -> Store:
    from core.store.sqlite import open_store  # the SQLite backend loads only when used

    return await open_store(path)


def render(letter: DeadLetter) -> str:
    """One line: id, platform, when, the item's id, the error and the raw form, cut short."""
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(letter.created_at))
    return (
        f"{letter.id}  {letter.platform}  {when}  {letter.item_id}  "
        f"{preview(letter.error, ERROR_WIDTH)}  |  {preview(letter.raw, RAW_WIDTH)}"
    )


def list_dead(path: Path) -> list[str]:
    """The lines ``commonos inbox dead`` prints (a header and one line per dead letter)."""
    letters = asyncio.run(_letters(path)) if path.exists() else []
    if not letters:
        return ["no dead letters"]
    return [HEADER, *(render(letter) for letter in letters)]


def drop_dead(path: Path, letter_id: int) -> bool:
    """Remove one dead letter; False when there is none with ``letter_id``."""
    return path.exists() and asyncio.run(_drop(path, letter_id))


async def _letters(path: Path) -> list[DeadLetter]:
    store = await _open(path)
    try:
        return await store.list_dead_letters()
    finally:
        await store.close()


async def _drop(path: Path, letter_id: int) -> bool:
    store = await _open(path)
    try:
        return await store.drop_dead_letter(letter_id)
    finally:
        await store.close()
