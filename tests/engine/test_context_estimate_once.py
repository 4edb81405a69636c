"""The context estimate is made once per model call (issue 29 §5.4): the fitted request
carries its raw estimate, and the usage estimate reads it instead of re-serialising; the
messages' wire form made for the estimate is the one sent."""

from __future__ import annotations

from core.agent.context import fit_request, raw_estimate
from core.agent.usage import estimated_usage
from core.model.base import ModelRequest
from core.model.wire import request_body
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
    usage = estimated_usage(request, ModelReply(content="hello"))
    assert usage.estimated and usage.prompt_tokens == 777


def test_the_fitted_requests_wire_form_is_made_once_and_sent_as_it_is() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 9_000}}
    history = [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content=[{"type": "text", "text": "look"}, image]),
    ]
    fitted = fit_request(history, window=8_000, tools=TOOLS)
    assert fitted.wire == [m.to_wire() for m in fitted.messages]  # image parts kept to send
    assert fitted.raw == raw_estimate(fitted.messages, TOOLS)  # counted, not their URL

    request = ModelRequest(messages=fitted.messages, tools=TOOLS, wire=fitted.wire)
    body = request_body("m", request, stream_usage=True)
    assert body["messages"] == fitted.wire
    assert all(a is b for a, b in zip(body["messages"], fitted.wire, strict=True))
