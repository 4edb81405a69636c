"""The context estimate is made once per model call (issue 29 §5.4): the fitted request
carries its raw estimate, and the usage estimate reads it instead of re-serialising."""

from __future__ import annotations

from core.agent.context import fit_request, raw_estimate
from core.agent.usage import spent
from core.model.base import ModelRequest
from core.types import ChatMessage, ModelReply, ToolSpec

TOOLS = [ToolSpec(name="terminal", description="run", parameters={"type": "object"})]


def test_the_fitted_request_carries_the_raw_estimate_of_what_it_kept() -> None:
    long = "x" * 40_000
    history = [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content=long),
        ChatMessage(role="assistant", content=long),
        ChatMessage(role="user", content="and now?"),
    ]
    fitted = fit_request(history, window=8_000, tools=TOOLS)
    assert fitted.messages != history  # cut to fit: the estimate is of the cut request
    assert fitted.raw == raw_estimate(fitted.messages, TOOLS)


def test_usage_estimated_from_the_requests_carried_estimate() -> None:
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")], estimated=777)
    usage = spent(request, ModelReply(content="hello"))
    assert usage.estimated and usage.prompt_tokens == 777
