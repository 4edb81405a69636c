"""An OTLP/HTTP trace collector on 127.0.0.1 for tests: what the gateway exported.

``POST /v1/traces`` takes an ``ExportTraceServiceRequest`` in protobuf (gzip or deflate
when ``Content-Encoding`` says so, as the gateway's exporter sends it: aiohttp's server
decodes the body, each request's encoding is kept in ``encodings``), answers 200 with an
empty ``ExportTraceServiceResponse``, and keeps every span as a :class:`ReceivedSpan`
(ids in hex, attributes as Python values, the resource's attributes beside them). Another
path or content type is answered 4xx and kept nowhere. ``await collector.wait_for(n)``
returns once ``n`` spans have arrived (an ``asyncio.Condition``, notified per request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

Value = str | bool | int | float | bytes | list[object] | None

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Value]
    resource: dict[str, Value]
    status_code: int
    """0 unset, 1 ok, 2 error (OTLP ``Status.StatusCode``)."""
    status_message: str
    events: tuple[str, ...] = field(default=())
    """Each event's name and attributes, rendered (the gateway records none)."""


class OtlpCollector:
    """The in-test collector; ``url`` is the base to put in ``[telemetry] otlp_endpoint``."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.encodings: list[str] = []
        """Each request's ``Content-Encoding`` (``identity`` when none)."""
        self._arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0

    async def start(self) -> OtlpCollector:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> OtlpCollector:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        """Every span received, once there are at least ``count``."""
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.spans) >= count), timeout
            )
        return list(self.spans)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text=f"expected {PROTOBUF}")
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())  # Content-Encoding undone by aiohttp
        async with self._arrived:
            self.encodings.append(request.headers.get("Content-Encoding", "identity"))
            self.spans.extend(_spans(export))
            self._arrived.notify_all()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF
        )


def _spans(export: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    for resource_spans in export.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        status_code=int(span.status.code),
                        status_message=span.status.message,
                        events=tuple(f"{e.name} {_attributes(e.attributes)}" for e in span.events),
                    )
                )
    return found


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Value]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Value:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return [f"{p.key}={_value(p.value)!r}" for p in value.kvlist_value.values]
    found: Value = getattr(value, kind)
    return found
