"""Traces (issue 23 point 5): a turn's spans, exported by OTLP, in one trace, with no text.

End to end: a real ``commonos run`` process with the Telegram simulator, the scripted model
server (one tool call, then the answer) and the in-test OTLP collector
(tests/support/otlp_collector.py): one turn yields ``turn``, ``model.call``, ``tool.call``
and ``platform.call`` spans in ONE trace with the right parents, no attribute holds the
user's message, the reply, the tool's arguments or the file's content, and the turn's log
lines carry the trace id. With telemetry off the same process never imports
OpenTelemetry. In process: the port (``core.tracing``) on the real SDK with its in-memory
exporter: sync and ``async with``, tasks started inside a span stay in its trace, a failure
is its type's name only, the log filter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core import tracing
from core.tools.sandbox import Workspaces
from gateway.cli.console import LOG_FORMAT
from gateway.otel import OtelTracer
from tests.platform_sim.telegram_sim import TelegramSim
from tests.platform_sim.telegram_types import ALICE
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.support.otlp_collector import OtlpCollector, ReceivedSpan
from tests.test_run_telegram import READY, TIMEOUT, RunningGateway, environment

USER_TEXT = "please read my plan zebra-quartz-7731"
FILE_NAME = "plan-walrus-5521.txt"
FILE_TEXT = "the content nobody may export: okapi-9043"
REPLY_TEXT = "Your plan says okapi, answered by narwhal-3388"
SERVICE = "commonos-trace-test"
HEX32 = re.compile(r"\A[0-9a-f]{32}\Z")


@pytest.fixture
async def collector() -> AsyncIterator[OtlpCollector]:
    async with OtlpCollector() as started:
        yield started


def write_config(home: Path, sim: TelegramSim, model: ScriptedModelServer, otlp: str) -> None:
    (home / "config.toml").write_text(
        f"""
[gateway]
log_level = "DEBUG"

[model]
provider = "openai"
base_url = "{model.url}"
api_key = "scripted-key"
model = "scripted-model"

[telegram]
token = "{sim.token}"
base_url = "{sim.url}/bot"
base_file_url = "{sim.url}/file/bot"
allowed_users = [{ALICE.id}]
{otlp}
"""
    )


@contextlib.asynccontextmanager
async def gateway_process(home: Path, *argv: str) -> AsyncIterator[RunningGateway]:
    """``python <argv>`` (default ``-m gateway run``) in ``home``, its stderr read."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, *(argv or ("-m", "gateway", "run")),
        env=environment(home), cwd=home, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = RunningGateway(process)
    reader = asyncio.create_task(running.drain())
    try:
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), TIMEOUT)
        await asyncio.wait_for(reader, TIMEOUT)


async def one_turn(home: Path, sim: TelegramSim, model: ScriptedModelServer) -> RunningGateway:
    """Alice asks; the model reads a file, then answers; the gateway is stopped (SIGTERM)."""
    workspace = Workspaces(home / "workspaces" / "default").path_for(f"telegram:dm:{ALICE.id}")
    workspace.mkdir(parents=True)
    (workspace / FILE_NAME).write_text(FILE_TEXT)
    model.script(
        reply_tool_call("read_file", {"path": FILE_NAME}, usage=(120, 9)),
        reply_text(REPLY_TEXT, usage=(160, 12)),
    )
    async with gateway_process(home) as gateway:
        await gateway.wait_for_line(READY)
        await sim.user_says(ALICE.id, USER_TEXT)
        await sim.wait_for_bot_message(ALICE.id, lambda m: "narwhal" in m.text, timeout=TIMEOUT)
        gateway.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(gateway.process.wait(), TIMEOUT) == 0
    return gateway


async def test_one_turn_is_one_trace_with_no_text_in_any_attribute(
    tmp_path: Path,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    collector: OtlpCollector,
) -> None:
    otlp = f'[telemetry]\notlp_endpoint = "{collector.url}"\nservice_name = "{SERVICE}"'
    write_config(tmp_path, telegram_sim, model_server, otlp)
    gateway = await one_turn(tmp_path, telegram_sim, model_server)
    spans = await collector.wait_for(5)  # flushed at stop: all of them are in by now
    (turn,) = [s for s in spans if s.name == "turn"]
    traced = [s for s in spans if s.trace_id == turn.trace_id]
    names = {s.name for s in traced}
    assert {"turn", "model.call", "tool.call", "platform.call"} <= names, names
    assert turn.parent_id is None and HEX32.match(turn.trace_id)
    by_id = {s.span_id: s for s in traced}
    for span in traced:
        if span is not turn:
            assert span.parent_id in by_id, f"{span.name} is outside the turn's tree"
    models = sorted((s for s in traced if s.name == "model.call"), key=_iteration)
    (tool,) = [s for s in traced if s.name == "tool.call"]
    assert [m.parent_id for m in models] == [turn.span_id, turn.span_id]
    assert tool.parent_id == turn.span_id
    assert [m.attributes["finish_reason"] for m in models] == ["tool_calls", "stop"]
    assert models[0].attributes["model.name"] == "scripted-model"
    assert (models[0].attributes["tokens.prompt"], models[1].attributes["tokens.completion"]) == (
        120,
        12,
    )
    assert tool.attributes["tool.name"] == "read_file"
    assert tool.attributes["tool.status"] == "finished"
    assert tool.attributes["tool.error"] is False
    assert turn.attributes["turn.status"] == "completed"
    assert turn.attributes["platform"] == "telegram"
    assert turn.attributes["session.hash"] == tracing.session_hash(f"telegram:dm:{ALICE.id}")
    sends = [s for s in traced if s.name == "platform.call" and s.attributes["call.kind"] == "send"]
    assert sends and all(s.attributes["platform"] == "telegram" for s in sends)
    assert turn.resource["service.name"] == SERVICE
    assert set(collector.encodings) == {"gzip"}
    instance = turn.resource["service.instance.id"]  # the process id: "<host>:<pid>/<8 hex>"
    assert isinstance(instance, str) and re.fullmatch(r".+:\d+/[0-9a-f]{8}", instance), instance
    _assert_no_text(spans)
    turn_lines = [line for line in gateway.lines if f" trace={turn.trace_id}" in line]
    assert turn_lines, "no log line of the turn carries its trace id"
    assert not any("trace=" in line for line in gateway.lines if READY in line)


def _iteration(span: ReceivedSpan) -> int:
    value = span.attributes["iteration"]
    assert isinstance(value, int)
    return value


def _assert_no_text(spans: list[ReceivedSpan]) -> None:
    """No attribute (or event) value of any span holds a piece of what was said or read."""
    secrets = ("zebra", "quartz", "walrus", "5521", "okapi", "narwhal", "plan-", FILE_NAME)
    for span in spans:
        values = [*map(str, span.attributes.values()), *span.events, span.status_message]
        for value in values:
            assert not any(secret in value for secret in secrets), (span.name, value)


OTEL_PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('otel modules:', sorted(m for m in sys.modules"
    " if m.startswith('opentelemetry')), file=sys.stderr))\n"
    "sys.argv = ['commonos', 'run']\n"
    "runpy.run_module('gateway', run_name='__main__')\n"
)


async def test_with_telemetry_off_opentelemetry_is_never_imported(
    tmp_path: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    write_config(tmp_path, telegram_sim, model_server, "")
    model_server.script(reply_text(REPLY_TEXT))
    async with gateway_process(tmp_path, "-c", OTEL_PROBE) as gateway:
        await gateway.wait_for_line(READY)
        await telegram_sim.user_says(ALICE.id, USER_TEXT)
        await telegram_sim.wait_for_bot_message(ALICE.id, timeout=TIMEOUT)
    assert "otel modules: []" in gateway.log, gateway.log[-2000:]
    assert "trace=" not in gateway.log


# the port in process, on the real SDK ---------------------------------------------------
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


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_tasks_started_inside_a_span_make_spans_in_its_trace(
    exported: InMemorySpanExporter,
) -> None:
    async def edit_later() -> None:
        async with tracing.span("platform.call", **{"call.kind": "edit"}):
            await asyncio.sleep(0)

    with tracing.span("outer"):  # a turn is always a new trace, whatever is current
        with tracing.trace("turn", platform="telegram") as turn:
            turn.set("turn.id", "t1")
            task = asyncio.create_task(edit_later())
        await task
    spans = {s.name: s for s in exported.get_finished_spans()}
    root, edit = spans["turn"], spans["platform.call"]
    assert root.parent is None and root.attributes == {"platform": "telegram", "turn.id": "t1"}
    assert edit.context.trace_id == root.context.trace_id
    assert _parent(edit) == root.context.span_id
    assert spans["outer"].context.trace_id != root.context.trace_id


async def test_a_failed_span_names_the_error_type_and_never_its_text(
    exported: InMemorySpanExporter,
) -> None:
    with pytest.raises(ValueError):
        async with tracing.span("tool.call", **{"tool.name": "read_file"}):
            raise ValueError("secret path /home/alice/diary.txt")
    (span,) = exported.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert span.status.description == "ValueError"
    assert not span.events


def test_log_lines_inside_a_span_carry_its_trace_id(exported: InMemorySpanExporter) -> None:
    formatter = logging.Formatter(LOG_FORMAT)
    ids = tracing.TraceIds()

    def line(message: str) -> str:
        record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, message, None, None)
        assert ids.filter(record)
        return formatter.format(record)

    assert line("outside").endswith("gateway.test: outside")
    with tracing.trace("turn"):
        trace_id = tracing.current_trace_id()
        inside = line("inside")
    assert trace_id is not None and HEX32.match(trace_id)
    assert inside.endswith(f"gateway.test: inside trace={trace_id}")
    assert tracing.current_trace_id() is None


async def test_with_no_tracer_spans_are_one_shared_no_op() -> None:
    assert not tracing.installed()
    with tracing.span("model.call", iteration=1) as sync_span:
        sync_span.set("tokens.prompt", 3)
    async with tracing.trace("turn") as async_span:
        assert tracing.current_trace_id() is None
    assert sync_span is async_span is tracing.NO_SPAN
