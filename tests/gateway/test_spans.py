"""A turn's spans through the whole gateway (harness: real dispatcher, engine, approvals,
pipeline), on the OpenTelemetry SDK with its in-memory exporter: the approval wait inside
its tool call, a failed platform call marked by its error's type alone, and no text of
the conversation in any attribute."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.base import AdapterError
from core import tracing
from gateway.otel import OtelTracer
from tests.gateway.fakes import Step
from tests.gateway.harness import ALICE, GatewayFactory

DANGER = Step(None, tools=(("danger", {"command": "rm -rf build-heron"}),))
SAID = ("clean up the heron", "heron", "rm -rf", "finished-egret")


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(OtelTracer(provider))
    try:
        yield exporter
    finally:
        tracing.install(None)
        provider.shutdown()


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (found,) = [s for s in spans if s.name == name]
    return found


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _assert_no_text(spans: list[ReadableSpan]) -> None:
    for span in spans:
        values = [str(v) for v in (span.attributes or {}).values()]
        values += [str(span.status.description), *(e.name for e in span.events)]
        for value in values:
            assert not any(said in value for said in SAID), (span.name, value)


async def test_an_approval_wait_is_a_span_inside_its_tool_call(
    running: GatewayFactory, exported: InMemorySpanExporter
) -> None:
    async with running(DANGER, Step("finished-egret")) as gw:
        await gw.say(ALICE, "clean up the heron")
        card = await gw.card()
        approve = next(b.data for row in card.buttons for b in row)
        await gw.press(ALICE, approve, card)
        await gw.idle()
    spans = list(exported.get_finished_spans())
    turn, tool, wait = _one(spans, "turn"), _one(spans, "tool.call"), _one(spans, "approval.wait")
    assert {s.context.trace_id for s in spans if s.name != "platform.call"} == {
        turn.context.trace_id
    }
    assert _parent(wait) == tool.context.span_id and _parent(tool) == turn.context.span_id
    assert dict(wait.attributes or {}) == {
        "approval.kind": "approval",
        "approval.outcome": "approved",
    }
    assert (tool.attributes or {})["approval.needed"] is True
    assert (tool.attributes or {})["tool.status"] == "finished"
    card_sends = [
        s
        for s in spans
        if s.name == "platform.call" and s.context.trace_id == turn.context.trace_id
    ]
    assert card_sends, "the card and the reply are platform calls of the turn"
    _assert_no_text(spans)


async def test_a_failed_platform_call_says_the_error_type_never_its_text(
    running: GatewayFactory, exported: InMemorySpanExporter
) -> None:
    async with running(Step("finished-egret")) as gw:
        gw.adapter.fail("send", AdapterError("chat heron is gone"))
        await gw.say(ALICE, "clean up the heron")
        await gw.idle()
    spans = list(exported.get_finished_spans())
    failed = [s for s in spans if s.name == "platform.call" and not s.status.is_ok]
    assert failed, [(s.name, s.status) for s in spans]
    assert {s.status.description for s in failed} == {"AdapterError"}
    assert all(_parent(s) == _one(spans, "turn").context.span_id for s in failed)
    _assert_no_text(spans)
