"""End to end: ``/model``, ``/busy``, ``/progress`` and ``/status`` through the real
python-telegram-bot against the simulator, each preset a real OpenAI client of the
scripted model server (the request's ``model`` field is what the server sees)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from gateway.service import GatewayService
from gateway.turns.presets import ModelPreset, ModelPresets
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.telegram.harness import Gateway, gateway_runs, replies

KEY = f"telegram:dm:{ALICE.id}"
PRESETS = {"fast": "small-fast-1", "big": "large-2"}


class PresetGateway(Gateway):
    """The harness's gateway with ``[models.fast]`` and ``[models.big]``: clients of the
    same scripted server under their own model names (closed by the service's stop)."""

    def __init__(
        self, sim: TelegramSim, models: ScriptedModelServer, *args: Any, **kwargs: Any
    ) -> None:
        self.models_url = models.url
        super().__init__(sim, models, *args, **kwargs)

    def _compose(self) -> GatewayService:
        service = super()._compose()
        service.settings.presets = ModelPresets(
            ModelPreset(name, self._client(model), stream=False) for name, model in PRESETS.items()
        )
        return service

    def _client(self, model: str) -> OpenAIClient:
        return OpenAIClient(base_url=self.models_url, model=model, trust_env=False)


Factory = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def gateway(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[Factory]:  # fmt: skip
    """Like the harness's fixture: each call is one run on the same sim and database."""
    async with gateway_runs(telegram_sim, model_server, store, tmp_path, PresetGateway) as start:
        yield start


async def ask(sim: TelegramSim, text: str, answer_has: str) -> str:
    await sim.user_says(ALICE.id, text)
    message = await sim.wait_for_bot_message(ALICE.id, lambda m: answer_has in m.text)
    return message.text


async def test_model_name_is_the_model_of_the_next_request_and_after_a_restart(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("one"), reply_text("two"), reply_text("three"))
    run = await gateway()
    await ask(telegram_sim, "hello", "one")
    await ask(telegram_sim, "/model fast", "Model: fast (small-fast-1)")
    await ask(telegram_sim, "and now?", "two")
    await run.idle(KEY)
    await run.stop()
    await gateway()  # a restart on the same store
    await ask(telegram_sim, "after the restart", "three")
    models = [request.body["model"] for request in model_server.requests]
    assert models == ["scripted", "small-fast-1", "small-fast-1"]


async def test_an_unknown_model_lists_the_presets(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    await gateway()
    answer = await ask(telegram_sim, "/model gpt-9", "Unknown model")
    assert answer == "Unknown model 'gpt-9'. Valid: default, fast, big."
    listing = await ask(telegram_sim, "/model", "Models")
    assert "▶ default — scripted" in listing and "• big — large-2" in listing
    assert model_server.requests == []


async def test_busy_interrupt_then_a_second_message_interrupts(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("too late")), reply_text("on it: the new task"))
    run = await gateway()  # the profile queues
    await ask(telegram_sim, "/busy interrupt", "stop the running turn")
    await telegram_sim.user_says(ALICE.id, "old task")
    [first] = await model_server.wait_for_requests(1)
    await telegram_sim.user_says(ALICE.id, "new task instead")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "new task" in m.text)
    await run.idle(KEY)
    assert first.closed.is_set()
    assert replies(telegram_sim, ALICE.id, "too late") == []
    assert replies(telegram_sim, ALICE.id, "Queued") == []


async def test_progress_off_sends_no_progress(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "echo hi"}, id="c1"), reply_text("ran it")
    )
    run = await gateway()  # the profile shows every step
    await ask(telegram_sim, "/progress off", "no progress message")
    await ask(telegram_sim, "run it", "ran it")
    await run.idle(KEY)
    await run.adapter.drain()
    texts = [m.text for m in telegram_sim.bot_messages(ALICE.id)]
    assert not any("terminal" in text for text in texts), texts
    assert not [c for c in telegram_sim.calls if c.method == "editMessageText"]


async def test_status_shows_the_settings(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    await gateway()
    commands = {
        "/model big": "large-2",
        "/busy steer": "added",
        "/progress tools": "tool changes",
        "/verbose off": "name only",
    }
    for command, said in commands.items():
        await ask(telegram_sim, command, said)
    status = await ask(telegram_sim, "/status", "Idle")
    assert status == "💤 Idle · model big (large-2) · busy steer · progress tools · verbose off"


async def test_busy_interrupt_still_holds_after_a_restart(
    gateway: Factory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("too late")), reply_text("the new one"))
    first = await gateway()
    await ask(telegram_sim, "/busy interrupt", "stop the running turn")
    await first.stop()
    run = await gateway()
    await telegram_sim.user_says(ALICE.id, "old task")
    await model_server.wait_for_requests(1)
    await telegram_sim.user_says(ALICE.id, "new task")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "the new one")
    await run.idle(KEY)
    assert replies(telegram_sim, ALICE.id, "too late") == []
    assert replies(telegram_sim, ALICE.id, "Queued") == []
