"""A fifth platform plugs in with one package and one registration (tests/loopback_platform/),
touching no module under gateway/: a turn answers through it on SQLite, and on PostgreSQL its
bot is leased by the cluster node from the registration's ``lease_credential``. No gateway
module names a platform."""

from __future__ import annotations

import ast
import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.platforms import register, unregister
from core.model.demo import DemoModel
from core.store.postgres import open_pg_store
from core.store.sqlite import open_store
from gateway.cluster.bots import LeasedBot
from gateway.cluster.node import ClusterNode
from gateway.cluster.relay_stage import bot_lease_name
from gateway.config import load_config
from gateway.config.sections import ClusterSection
from gateway.service import GatewayService
from gateway.wiring import build_service
from tests.gateway.fakes import Person, event
from tests.loopback_platform import platform as loopback

ALICE = Person("7", "Alice")
GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
PLATFORM_NAMES = {"telegram", "discord", "slack", "loopback"}


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    register(loopback.PLATFORM)
    loopback.built.clear()
    yield
    unregister(loopback.NAME)


def config_in(home: Path, store: str = "") -> object:
    text = f'{store}[loopback]\nallowed_users = ["7"]\ntoken = "tok-1"\n[web]\nenabled = false\n'
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={"COMMONOS_HOME": str(home)})


async def answered(service: GatewayService, adapter: loopback.LoopbackAdapter) -> str:
    assert adapter.sink is not None
    await adapter.sink(event(ALICE, "hello loopback", platform=loopback.NAME))
    return (await adapter.wait_sent(lambda text: "[demo model]" in text)).text


async def test_a_turn_answers_through_the_loopback_platform_on_sqlite(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    store = await open_store(tmp_path / "commonos.db")
    service = build_service(config, store, DemoModel())  # type: ignore[arg-type]
    await service.start()
    try:
        (adapter,) = loopback.built
        assert "hello loopback" in await answered(service, adapter)
    finally:
        await service.stop()
        await store.close()


async def never(seconds: float) -> None:
    """The node's heartbeat sleep: the test needs no tick."""
    await asyncio.Event().wait()


async def test_the_loopback_bot_is_leased_from_its_registration_on_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    config = config_in(tmp_path)
    process_id = f"loop/{secrets.token_hex(4)}"
    store = await open_pg_store(pg_url, process_id=process_id, pool_size=4)
    node = ClusterNode(
        store, ClusterSection(lease_seconds=30), web_url=None, process_id=process_id, sleep=never
    )
    service = build_service(config, store, DemoModel(), node=node)  # type: ignore[arg-type]
    lease = bot_lease_name(loopback.NAME, "tok-1")
    (bot,) = node.bots.values()
    assert isinstance(bot, LeasedBot) and bot.bot == lease and not bot.owned
    (adapter,) = loopback.built
    assert adapter.sink is None  # attached, not started: the lease decides
    await service.start()
    try:
        assert bot.owned and adapter.sink is not None  # started once the lease was taken
        outbound = service.directory.outbound(loopback.NAME)
        assert outbound is not None and outbound.relay is bot.stage
        assert "hello loopback" in await answered(service, adapter)
        assert node.stats().bots_owned == (lease,)
    finally:
        await service.stop()
        await store.close()


def _literals(path: Path) -> set[str]:
    """String constants of ``path`` that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    }  # fmt: skip


@pytest.mark.parametrize(
    "module",
    [
        *sorted(p.relative_to(GATEWAY).as_posix() for p in (GATEWAY / "cluster").glob("*.py")),
        "outbound/pipeline.py",
        "outbound/directory.py",
        "wiring.py",
        "service.py",
        "app.py",
    ],
)
def test_no_gateway_module_names_a_platform(module: str) -> None:
    named = {text for text in _literals(GATEWAY / module) if text.lower() in PLATFORM_NAMES}
    assert named == set(), f"gateway/{module} names {sorted(named)}"
