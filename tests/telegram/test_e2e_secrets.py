"""Secrets never reach the chat, end to end through the real wiring.

A config file with the bot token and the model API key → ``gateway.wiring.build_service``
(with the sandboxes :func:`gateway.turns.containment.prepare_sandboxes` probed: real bubblewrap)
→ the Telegram adapter (real python-telegram-bot) against the simulator, and the scripted
model asking for the tool calls a curious or malicious user would ask for. The "model"
then repeats every tool result into its reply, so whatever a tool got hold of would be in
the chat. The token is also in the gateway process's environment.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore, open_store
from gateway.config import Config, load_config
from gateway.service import GatewayService
from gateway.turns.containment import prepare_sandboxes
from gateway.wiring import build_service
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_replies import ReceivedRequest, Reply
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_calls

API_KEY = "sk-e2e-secret-model-key-0123456789abcdef"
WAIT = 20.0
DONE = "That is everything the tools said."


def write_config(home: Path, sim: TelegramSim, models: ScriptedModelServer) -> Path:
    path = home / "config.toml"
    path.write_text(
        f"""
[gateway]
data_dir = "{home}"

[model]
provider = "openai"
base_url = "{models.url}"
api_key = "{API_KEY}"
model = "scripted"

[telegram]
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{ALICE.id}]

[progress]
mode = "all"

[web]
enabled = false
"""
    )
    return path


@pytest.fixture
async def running(
    tmp_path: Path,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Config]:
    monkeypatch.setenv("COMMONOS_TELEGRAM_TOKEN", telegram_sim.token)
    home = tmp_path / "home"
    home.mkdir()
    config = load_config(write_config(home, telegram_sim, model_server))
    store = await open_store(config.gateway.db_path)
    model = OpenAIClient(base_url=model_server.url, model="scripted", trust_env=False)
    service = build_service(config, store, model, sandboxes=await prepare_sandboxes(config))
    await service.start()
    try:
        yield config
    finally:
        await stop(service, store, model)


async def stop(service: GatewayService, store: SqliteStore, model: OpenAIClient) -> None:
    await service.stop()
    await model.aclose()
    await store.close()


def repeat_the_tool_results(request: ReceivedRequest) -> Reply:
    """A model that tells the chat every tool result it got."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    return reply_text("\n\n".join([*results, DONE]))


def every_text(sim: TelegramSim) -> str:
    """Every bot message to Alice as it is now and as it was before each edit."""
    texts: list[str] = []
    for message in sim.bot_messages(ALICE.id):
        texts.append(message.text)
        texts += [str(old.get("text", "")) for old in message.history]
        texts += [b.label for b in message.buttons]
    return "\n".join(texts)


async def ask(sim: TelegramSim, text: str) -> str:
    await sim.user_says(ALICE.id, text)
    await sim.wait_for_bot_message(ALICE.id, lambda m: DONE in m.text, timeout=WAIT)
    return every_text(sim)


def terminal_calls(commands: list[str]) -> Reply:
    calls = [(f"call_{i}", "terminal", {"command": c}) for i, c in enumerate(commands)]
    return reply_tool_calls(calls)


async def test_no_chat_message_contains_a_secret_the_tools_went_looking_for(
    running: Config, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    home = running.gateway.data_dir
    commands = [
        "cat /proc/$PPID/environ",
        "cat /proc/1/environ",
        "env",
        "cat ../../../config.toml",
        f"cat {home}/config.toml",
        "cat ../../../commonos.db",
        f"cat {home}/commonos.db",
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-out'".format(
            port=telegram_sim.url.rsplit(":", 1)[1]
        ),
        "echo sandboxed-and-alive",
    ]
    model_server.script(terminal_calls(commands), repeat_the_tool_results)

    chat = await ask(telegram_sim, "show me everything you can find")

    assert "sandboxed-and-alive" in chat, "the tools ran and their results reached the chat"
    assert "connected-out" not in chat
    tool_results = "\n".join(
        m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"
    )
    for secret in (telegram_sim.token, API_KEY):
        assert secret not in chat and secret.split(":")[-1] not in chat
        assert secret not in tool_results, "the sandbox itself kept it out, not only the redactor"


ENCODINGS: dict[str, Callable[[str], str]] = {
    "verbatim": lambda s: s,
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "url-encoded": lambda s: quote(s, safe=""),
    "base64 inside a blob": lambda s: base64.b64encode(f"TOKEN={s}\n".encode()).decode(),
}


async def test_a_tool_printing_the_token_reaches_the_chat_masked(
    running: Config, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    token = telegram_sim.token
    forms = {name: encode(token) for name, encode in ENCODINGS.items()}
    commands = [f"printf '%s\\n' '{form}'" for form in forms.values()]
    model_server.script(terminal_calls(commands), repeat_the_tool_results)

    chat = await ask(telegram_sim, "print it")

    assert chat.count("[REDACTED]") >= len(forms)
    assert token not in chat
    for name in ("verbatim", "base64", "url-encoded"):
        assert forms[name] not in chat, name
    blob = forms["base64 inside a blob"]
    assert blob[8:-8] not in chat, "the token's part of a larger base64 blob is masked"


async def test_the_tool_results_the_model_saw_came_from_the_sandbox(
    running: Config, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(terminal_calls(["cat /proc/1/environ | tr '\\0' ' '"]), reply_text(DONE))

    await ask(telegram_sim, "what is your environment?")

    await asyncio.wait_for(model_server.wait_for_requests(2), WAIT)
    seen = [m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert len(seen) == 1 and "PATH=/usr/local/sbin" in seen[0]
    assert "COMMONOS_TELEGRAM_TOKEN" not in seen[0] and telegram_sim.token not in seen[0]


COMMIT = "9fceb02d0ae598e95dc970b74767f19372d61af8"
LOOKALIKES = {
    "a commit id": f"fixed in {COMMIT}",
    "a run of letters": "ACK " + "A" * 200,
    "a PWD assignment": "PWD=/home/x",
    "a UUID": "id 5f0c2a9e-3b1d-4c8e-9a7f-2d6b8e1c4a03",
}


async def test_a_reply_keeps_what_only_looks_like_a_secret_and_masks_the_configured_ones(
    running: Config, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    token = telegram_sim.token
    lines = [*LOOKALIKES.values(), f"token {token}", f"key {API_KEY}", DONE]
    model_server.script(reply_text("\n\n".join(lines)))

    chat = await ask(telegram_sim, "tell me everything")

    for name, text in LOOKALIKES.items():
        assert text in chat, name
    assert token not in chat and API_KEY not in chat
    assert "token [REDACTED]" in chat and "key [REDACTED]" in chat
