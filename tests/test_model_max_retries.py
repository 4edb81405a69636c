"""``[model] max_retries`` and ``slow_notice_seconds``: from config.toml through the wiring
to every agent's retry policy, counted in requests to the scripted model server."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.model.factory import build_model_client
from core.model.retry import RetryPolicy
from core.store.sqlite import SqliteStore
from gateway.config import Config, ConfigError, load_config
from gateway.service import GatewayService
from gateway.wiring import build_service
from tests.support.model_server import Reply, ScriptedModelServer, reply_error, reply_text

KEY = "test:dm:1"


def config_with(tmp_path: Path, server: ScriptedModelServer, model_lines: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{tmp_path / "data"}"\n\n'
        f'[model]\nprovider = "openai"\nbase_url = "{server.url}"\napi_key = "test-key"\n'
        f'model = "scripted"\ntimeout = 5\n{model_lines}\n',
        encoding="utf-8",
    )
    return load_config(path, env={"COMMONOS_HOME": str(tmp_path)})


def unavailable() -> Reply:
    return reply_error(503, "overloaded", headers={"Retry-After": "0"})


async def run_one_turn(config: Config, store: SqliteStore) -> tuple[GatewayService, str]:
    model = config.model
    client = build_model_client(
        model.provider, base_url=model.base_url, api_key=model.api_key, model=model.model
    )
    service = build_service(config, store, client)
    try:
        agent = service.agent_for(KEY)
        result = await agent.run_turn(KEY, UserMessage("hi", sender_id="alice"), TurnControl())
    finally:
        await client.aclose()
    return service, f"{result.status}/{result.exit_reason}: {result.reply}"


async def test_max_retries_zero_makes_exactly_one_request(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    model_server.script(unavailable(), reply_text("a retry would get this"))
    config = config_with(tmp_path, model_server, "max_retries = 0")

    _, outcome = await run_one_turn(config, store)

    assert len(model_server.requests) == 1
    assert outcome.startswith("failed/model_error: The model server is unavailable right now")
    assert "503" in outcome


async def test_max_retries_two_makes_three_requests_then_gives_up(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    model_server.script(unavailable(), unavailable(), unavailable(), reply_text("fourth"))
    config = config_with(tmp_path, model_server, "max_retries = 2")

    _, outcome = await run_one_turn(config, store)

    assert len(model_server.requests) == 3
    assert outcome.startswith("failed/model_error")


async def test_a_retry_that_succeeds_answers_the_user(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    model_server.script(unavailable(), reply_text("second try"))
    config = config_with(tmp_path, model_server, "max_retries = 1")

    _, outcome = await run_one_turn(config, store)

    assert outcome == "completed/text_response: second try"
    assert len(model_server.requests) == 2


async def test_slow_notice_seconds_reaches_the_agents_policy(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    config = config_with(tmp_path, model_server, "max_retries = 5\nslow_notice_seconds = 0")
    client = build_model_client("demo")

    service = build_service(config, store, client)

    policy = service.agent_for(KEY).retry
    assert (policy.max_attempts, policy.slow_notice_seconds) == (6, 0.0)


def test_slow_notice_seconds_defaults_to_twenty(tmp_path: Path) -> None:
    config = load_config(env={"COMMONOS_HOME": str(tmp_path)})

    assert config.model.slow_notice_seconds == 20.0
    assert RetryPolicy.with_retries(config.model.max_retries).max_attempts == 4


@pytest.mark.parametrize("value", ["-1", '"soon"', "true", "inf"])
def test_a_bad_slow_notice_seconds_is_one_readable_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[model]\nslow_notice_seconds = {value}\n", encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        load_config(path, env={"COMMONOS_HOME": str(tmp_path)})

    assert "slow_notice_seconds" in str(raised.value)
    assert "seconds ≥ 0" in str(raised.value)
