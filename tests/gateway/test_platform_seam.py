"""A platform is one package plus one registration: a platform defined in this test plugs
into the real config loader and the real composition root without editing any gateway
module, and a turn runs through it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.base import Adapter
from adapters.config import GroupChatSection, Text
from adapters.platforms import AdapterContext, Platform, platforms, register, unregister
from core.model.demo import DemoModel
from core.store.sqlite import open_store
from gateway.config import ConfigError, load_config
from gateway.wiring import build_service
from tests.gateway.fakes import FakeAdapter, Person, event

ALICE = Person("7", "Alice")


class EchoSection(GroupChatSection):
    """The whole of the in-test platform's ``[echo]`` table."""

    greeting: Text = "hi"


built: list[FakeAdapter] = []


def build_echo(section: EchoSection, context: AdapterContext) -> Adapter:
    adapter = FakeAdapter(platform="echo")
    built.append(adapter)
    return adapter


@pytest.fixture
def echo_platform() -> Iterator[None]:
    register(Platform("echo", EchoSection, build_echo))
    built.clear()
    yield
    unregister("echo")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.usefixtures("echo_platform")
def test_a_registered_platforms_section_is_validated_like_the_built_in_ones(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "[echo]\ngreting = 1\n[web]\nenabled = false\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={"COMMONOS_HOME": str(tmp_path)})
    assert raised.value.errors == [f'{path}: echo.greting: unknown key (did you mean "greeting"?)']


def test_an_unregistered_platform_is_an_unknown_section(tmp_path: Path) -> None:
    path = write(tmp_path, "[echo]\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={"COMMONOS_HOME": str(tmp_path)})
    assert raised.value.errors == [f"{path}: echo: unknown section"]
    assert "echo" not in platforms()


@pytest.mark.usefixtures("echo_platform")
async def test_a_turn_runs_through_a_platform_defined_outside_the_gateway(tmp_path: Path) -> None:
    text = '[echo]\nallowed_users = ["7"]\ngreeting = "hello"\n[web]\nenabled = false\n'
    config = load_config(write(tmp_path, text), env={"COMMONOS_HOME": str(tmp_path)})
    assert config.platform("echo").greeting == "hello"
    store = await open_store(tmp_path / "commonos.db")
    service = build_service(config, store, DemoModel())
    await service.start()
    try:
        (adapter,) = built
        assert adapter.sink is not None
        await adapter.sink(event(ALICE, "hello there", platform="echo"))
        reply = await adapter.wait_sent(lambda text: "[demo model]" in text)
        assert "hello there" in reply.text
    finally:
        await service.stop()
        await store.close()


@pytest.mark.usefixtures("echo_platform")
async def test_a_configured_platform_without_an_adapter_is_named_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    register(Platform("later", EchoSection, None))
    try:
        path = write(tmp_path, "[later]\n[web]\nenabled = false\n")
        config = load_config(path, env={"COMMONOS_HOME": str(tmp_path)})
        store = await open_store(tmp_path / "commonos.db")
        with caplog.at_level(logging.INFO, logger="gateway.wiring"):
            service = build_service(config, store, DemoModel())
        await store.close()
    finally:
        unregister("later")
    lines = [record.getMessage() for record in caplog.records]
    assert "[later] is configured, but its adapter is not built yet" in lines
    assert "no chat platform is configured: nothing can reach the agent" in lines
    assert service.directory.adapters == []
