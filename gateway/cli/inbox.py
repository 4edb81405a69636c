"""``commonos inbox dead`` and ``commonos inbox drop ID``: the operator's view of the
inbound items every platform's inbox quarantined (:mod:`adapters.inbox`).

Both open the configured store directly (:mod:`gateway.stores`); they can run while
the gateway runs (SQLite in WAL mode lets a second process read and make a small write;
PostgreSQL is shared).
"""

from __future__ import annotations

import asyncio
import time

from adapters.inbox import preview
from core.store.base import DeadLetter
from gateway.config import Config
from gateway.stores import configured_store, store_exists

ERROR_WIDTH = 60
RAW_WIDTH = 80
HEADER = "ID  PLATFORM  WHEN (UTC)  ITEM  ERROR  |  RAW"


def render(letter: DeadLetter) -> str:
    """One line: id, platform, when, the item's id, the error and the raw form, cut short."""
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(letter.created_at))
    return (
        f"{letter.id}  {letter.platform}  {when}  {letter.item_id}  "
        f"{preview(letter.error, ERROR_WIDTH)}  |  {preview(letter.raw, RAW_WIDTH)}"
    )


def list_dead(config: Config) -> list[str]:
    """The lines ``commonos inbox dead`` prints (a header and one line per dead letter)."""
    letters = asyncio.run(_letters(config)) if store_exists(config) else []
    if not letters:
        return ["no dead letters"]
    return [HEADER, *(render(letter) for letter in letters)]


def drop_dead(config: Config, letter_id: int) -> bool:
    """Remove one dead letter; False when there is none with ``letter_id``."""
    return store_exists(config) and asyncio.run(_drop(config, letter_id))


async def _letters(config: Config) -> list[DeadLetter]:
    async with configured_store(config) as store:
        return await store.list_dead_letters()


async def _drop(config: Config, letter_id: int) -> bool:
    async with configured_store(config) as store:
        return await store.drop_dead_letter(letter_id)
