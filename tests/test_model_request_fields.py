"""``[model] max_tokens``, ``temperature``, ``top_p`` and ``extra_body`` (issue 19 item 6):
from config.toml through the gateway's model client to every request the scripted model
server receives; a bad value is one readable config error."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.model.base import ModelRequest
from core.store.sqlite import SqliteStore
from core.types import ChatMessage
from gateway.app import _build_model
from gateway.config import Config, ConfigError, load_config
from gateway.wiring import build_service
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call

KEY = "test:dm:1"
FIELDS = """max_tokens = 256
temperature = 0
top_p = 0.9
extra_body = { seed = 7, chat_template_kwargs = { enable_thinking = false }, tool_choice = "auto" }
"""


def config_with(tmp_path: Path, model_lines: str, url: str = "http://127.0.0.1:9/v1") -> Config:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{tmp_path / "data"}"\n\n'
        f'[model]\nprovider = "openai"\nbase_url = "{url}"\napi_key = "test-key"\n'
        f'model = "scripted"\n{model_lines}\n',
        encoding="utf-8",
    )
    return load_config(path, env={"COMMONOS_HOME": str(tmp_path)})


async def test_the_fields_reach_every_request_of_a_turn(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    config = config_with(tmp_path, FIELDS, model_server.url)
    model_server.script(reply_tool_call("todo", {"todos": []}), reply_text("done"))
    client = _build_model(config.model)
    try:
        agent = build_service(config, store, client).agent_for(KEY)
        await agent.run_turn(KEY, UserMessage("hi", sender_id="alice"), TurnControl())
    finally:
        await client.aclose()

    assert len(model_server.requests) == 2
    for request in model_server.requests:
        body = request.body
        assert (body["max_tokens"], body["temperature"], body["top_p"]) == (256, 0.0, 0.9)
        assert body["seed"] == 7
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert body["model"] == "scripted" and body["messages"][-1]["role"] in ("user", "tool")


async def test_a_field_the_call_sets_itself_wins_and_reserved_fields_are_never_replaced(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    config = config_with(tmp_path, FIELDS, model_server.url)
    model_server.script(reply_text("ok"))
    client = _build_model(config.model)
    grace = ModelRequest(
        [ChatMessage(role="user", content="hi")], extra={"tool_choice": "none"}, stream=True
    )
    try:
        await client.complete(grace)
    finally:
        await client.aclose()

    body = model_server.requests[0].body
    assert body["tool_choice"] == "none"  # the grace call's, not extra_body's "auto"
    assert body["stream"] is True and body["max_tokens"] == 256


def test_unset_fields_send_nothing(tmp_path: Path) -> None:
    assert config_with(tmp_path, "").model.request_fields() == {}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max_tokens = 0", "model.max_tokens: expected a positive integer, got 0"),
        ("temperature = 3", "model.temperature: expected a number from 0 to 2, got 3"),
        ('top_p = "high"', 'model.top_p: expected a number from 0 to 1, got "high" (string)'),
        ("extra_body = 5", "model.extra_body: expected a table, got 5 (integer)"),
        (
            'extra_body = { model = "other", seed = 1 }',
            "model.extra_body: model cannot be set here: the gateway sends them itself",
        ),
        (
            "extra_body = { max_tokens = 9 }",
            "model.extra_body: set max_tokens as [model] max_tokens, not in extra_body",
        ),
    ],
)
def test_a_bad_value_is_one_readable_config_error(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        config_with(tmp_path, line)
    text = str(error.value)
    assert message in text
    assert text.count("model.") == 1, text
