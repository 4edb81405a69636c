"""Each server's real context-overflow reply is classified ``context_too_long`` by the one
list of wordings in ``core/model/classify.py`` (``docs/turn-loop.md`` §18)."""

from __future__ import annotations

import pytest

from core.model.base import ModelRequest
from core.model.errors import ModelError
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage
from tests.support.model_errors import CONTEXT_OVERFLOWS, ServerError
from tests.support.model_server import ScriptedModelServer


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("overflow", CONTEXT_OVERFLOWS, ids=lambda e: e.server)
async def test_a_context_overflow_reply_is_context_too_long(
    model_server: ScriptedModelServer, overflow: ServerError, stream: bool
) -> None:
    model_server.script(overflow.reply())
    client = OpenAIClient(base_url=model_server.url, model="m", trust_env=False)
    request = ModelRequest(messages=[ChatMessage("user", "hi")], stream=stream)
    try:
        with pytest.raises(ModelError) as raised:
            await client.complete(request)
    finally:
        await client.aclose()
    found = raised.value.classification
    assert (found.kind, found.status, found.retryable) == ("context_too_long", 400, False)
