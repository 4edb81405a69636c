"""``commonos pair`` as a real process on a real store file (docs/pairing.md): a wrong
code exits 1 with one line; revoke takes a pairing away."""

from __future__ import annotations

from pathlib import Path

from core.store.base import PairedUser
from core.store.sqlite import open_store
from tests.test_cli_inbox import commonos, db_path


async def test_pair_approve_of_a_wrong_code_and_revoke(tmp_path: Path) -> None:
    store = await open_store(db_path(tmp_path))
    try:
        await store.pair_user(PairedUser("telegram", "99", "Carol", 1.7e9, "telegram:42"))
    finally:
        await store.close()
    code, out, err = await commonos(tmp_path, "pair", "approve", "ABCD-EFGH")
    assert (code, out) == (1, "")
    assert err == "commonos: no pending request has that code (see `commonos pair list`)\n"
    code, out, err = await commonos(tmp_path, "pair", "revoke", "telegram:99")
    assert (code, out, err) == (0, "revoked telegram:99\n", "")
    store = await open_store(db_path(tmp_path))
    try:
        assert await store.paired_users() == []
    finally:
        await store.close()
