"""The inbound fold (gateway/inbound/stages.py): order, names, a stage that ends the chain,
built once at start with only the stages of the features that are on (issue 29 point 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.base import InboundEvent
from gateway.cli.main import main
from gateway.control.access import AccessPolicy
from gateway.inbound.stages import Inbound, InboundFeatures, Named, Next, fold, names
from gateway.turns.progress import ProgressConfig
from tests.gateway.fakes import FakeAdapter, event
from tests.gateway.harness import ALICE, GatewayFactory


def recording(name: str, seen: list[str], *, stop: bool = False) -> Named:
    async def stage(inbound: InboundEvent, next: Next) -> None:
        seen.append(name)
        if not stop:
            await next(inbound)

    return Named(name, stage)


async def test_stages_run_in_list_order_then_the_last() -> None:
    seen: list[str] = []

    async def last(inbound: InboundEvent) -> None:
        seen.append("dispatch")

    stages = [recording("received", seen), recording("access", seen), recording("record", seen)]
    await fold(stages, last)(event(ALICE, "hi"))
    assert seen == ["received", "access", "record", "dispatch"]
    assert names(stages) == ("received", "access", "record")


async def test_a_stage_that_does_not_call_next_ends_the_chain() -> None:
    seen: list[str] = []

    async def last(inbound: InboundEvent) -> None:
        seen.append("dispatch")

    inbound = Inbound(
        [recording("received", seen), recording("access", seen, stop=True),
         recording("record", seen)],
        last,
    )  # fmt: skip
    await inbound(event(ALICE, "hi"))
    assert seen == ["received", "access"]
    assert inbound.names == ("received", "access", "record", "dispatch")


def test_stages_out_of_order_are_refused() -> None:
    async def last(inbound: InboundEvent) -> None: ...

    with pytest.raises(ValueError, match="out of order"):
        Inbound([recording("record", []), recording("access", [])], last)


async def test_built_once_at_start_with_only_the_stages_that_are_on(
    running: GatewayFactory,
) -> None:
    async with running() as gw:
        inbound = gw.service.inbound
        assert inbound is not None
        assert inbound.names == ("received", "press", "access", "record", "dispatch")
        assert gw.adapter.sink is inbound.enter  # the adapter's sink is the fold itself
        await gw.say(ALICE, "/help")
        assert gw.service.inbound is inbound  # not rebuilt per event


async def test_features_that_are_on_add_their_stages(running: GatewayFactory) -> None:
    bots = AccessPolicy(allowed_users=frozenset({"1"}), allow_bots=True, pairing=True)
    other = FakeAdapter(platform="other")
    options = dict(
        access=bots, elsewhere=other, progress=ProgressConfig(mode="all", reactions=True)
    )
    async with running(**options) as gw:
        inbound = gw.service.inbound
        assert inbound is not None
        assert inbound.names == (
            "received", "press", "access_pairing", "bot_guard", "link_rekey", "record",
            "reactions", "dispatch",
        )  # fmt: skip
        assert other.sink is gw.adapter.sink is inbound.enter  # one fold for every adapter
        assert gw.service.features().names() == inbound.names


def test_check_config_prints_the_inbound_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COMMONOS_HOME", str(tmp_path))
    plain = tmp_path / "plain.toml"
    plain.write_text('[telegram]\ntoken = "123:abc"\n[access]\ntelegram = [42]\n')
    assert main(["check-config", str(plain)]) == 0
    # telegram and the web chat (on by default): two platforms, so links can join them
    shown = "# inbound stages: received -> press -> access -> link_rekey -> record -> dispatch"
    assert shown in capsys.readouterr().out
    on = tmp_path / "on.toml"
    on.write_text(
        '[telegram]\ntoken = "123:abc"\npairing = true\n[access]\ntelegram = [42]\n'
        "[progress]\nreactions = true\n"
    )
    assert main(["check-config", str(on)]) == 0
    out = capsys.readouterr().out
    assert "press -> access_pairing -> link_rekey -> record -> reactions -> dispatch" in out
    features = InboundFeatures(pairing=True, links=True, reactions=True)
    assert " -> ".join(features.names()) in out
