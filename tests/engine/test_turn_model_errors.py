"""Model failures: error hooks, retries, and a readable failed turn (seed 000 step 5)."""

from __future__ import annotations

from core.model.errors import ErrorClassification
from tests.engine.conftest import Rig
from tests.support.model_server import reply_error, reply_text


async def test_a_retryable_error_is_retried_after_the_error_hooks(rig: Rig) -> None:
    rig.server.script(reply_error(502, "bad gateway"), reply_text("ok"))

    result = await rig.turn("hi")

    assert (result.status, result.reply) == ("completed", "ok")
    assert rig.log.names()[2:8] == [
        "pre_api_request",
        "api_request_error",
        "transform_api_error_classification",
        "pre_api_request",
        "post_api_request",
        "transform_llm_output",
    ]
    error = rig.log.of("api_request_error")[0]["error"]
    assert (error.kind, error.classification.status) == ("server", 502)
    assert result.iterations == 1


async def test_a_model_that_keeps_failing_ends_the_turn_failed_and_readable(rig: Rig) -> None:
    rig.server.script(*[reply_error(502, "bad gateway")] * 3)

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason) == ("failed", "model_error")
    assert result.reply == (
        "The model server is unavailable right now (HTTP 502: bad gateway). "
        "Nothing was lost; try again."
    )
    assert len(rig.server.requests) == 3
    turn = await rig.store.get_turn(result.turn_id)
    assert turn is not None and turn.error is not None and "server" in turn.error
    assert (turn.status, turn.exit_reason) == ("failed", "model_error")
    assert [m.role for m in await rig.stored()] == ["user"]
    assert rig.log.of("agent_loop_stopped")[0]["reason"] == "model_error"
    assert rig.log.names()[-1] == "on_session_end"


async def test_a_non_retryable_error_is_not_retried(rig: Rig) -> None:
    rig.server.script(reply_error(401, "bad key", type="invalid_request_error"))

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason) == ("failed", "model_error")
    assert (
        result.reply
        == "The model server refused the API key (HTTP 401: bad key). Check [model] api_key."
    )
    assert len(rig.server.requests) == 1


async def test_transform_api_error_classification_can_make_an_error_retryable(rig: Rig) -> None:
    def quirk(value: ErrorClassification, **kw: object) -> ErrorClassification | None:
        return value.with_retryable(True) if value.status == 400 else None

    rig.hooks.register("transform_api_error_classification", quirk)
    rig.server.script(reply_error(400, "provider hiccup", type="invalid_request_error"))
    rig.server.script(reply_text("fine now"))

    result = await rig.turn("hi")

    assert (result.status, result.reply) == ("completed", "fine now")
    assert len(rig.server.requests) == 2
