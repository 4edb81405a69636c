"""The tracing port (:mod:`core.tracing`) on OpenTelemetry, exported by OTLP/HTTP.

Imported only by :func:`gateway.telemetry.start` once ``[telemetry] otlp_endpoint`` is set:
with telemetry off, no OpenTelemetry module is loaded at all.

:func:`otlp_provider` builds the SDK's ``TracerProvider`` for one gateway process: its
resource names the service (``[telemetry] service_name``) and the process
(``service.instance.id``, the cluster's process id), and a ``BatchSpanProcessor`` sends
finished spans as protobuf to ``<endpoint>/v1/traces`` in the background (gzip). The
provider is not made OpenTelemetry's global one: the gateway's spans go through the port
alone, and a library's own instrumentation stays off.

:class:`OtelTracer` is the port's :class:`core.tracing.Tracer`. A span ended by an
exception is marked ``ERROR`` with the exception's type name as its description; the
exception itself is never recorded (its text may quote a message or a path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from core.tracing import AttributeValue, Span

EXPORT_TIMEOUT = 5.0
"""Seconds one export request may take (the flush at stop waits at most this per batch)."""
INSTRUMENTATION = "commonos.gateway"


def otlp_provider(endpoint: str, service_name: str, process_id: str) -> TracerProvider:
    """A provider whose finished spans go, batched, to ``<endpoint>/v1/traces``."""
    resource = Resource.create({"service.name": service_name, "service.instance.id": process_id})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(
        endpoint=f"{endpoint.rstrip('/')}/v1/traces",
        timeout=EXPORT_TIMEOUT,
        compression=Compression.Gzip,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class _Attributes:
    """The port's :class:`core.tracing.Span` over an OpenTelemetry span."""

    __slots__ = ("_span",)

    def __init__(self, span: otel_trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self._span.set_attribute(key, value)


class OtelTracer:
    """Spans of ``provider``, current in OpenTelemetry's context (a context variable)."""

    def __init__(self, provider: TracerProvider) -> None:
        self._tracer = provider.get_tracer(INSTRUMENTATION)

    def start(
        self, name: str, attributes: dict[str, AttributeValue], *, root: bool
    ) -> AbstractContextManager[Span]:
        return self._span(name, attributes, root)

    @contextmanager
    def _span(self, name: str, attributes: dict[str, AttributeValue], root: bool) -> Iterator[Span]:
        parent = otel_context.Context() if root else None  # an empty context: a new trace
        with self._tracer.start_as_current_span(
            name, context=parent, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                yield _Attributes(span)
            except BaseException as error:
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                raise

    def current_trace_id(self) -> str | None:
        found = otel_trace.get_current_span().get_span_context()
        return format_trace_id(found.trace_id) if found.is_valid else None

    def carrier(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        _PROPAGATOR.inject(fields)
        return fields

    @contextmanager
    def joined(self, carrier: dict[str, str]) -> Iterator[None]:
        token = otel_context.attach(_PROPAGATOR.extract(carrier))
        try:
            yield
        finally:
            otel_context.detach(token)


_PROPAGATOR = TraceContextTextMapPropagator()
"""W3C trace context (``traceparent``): the only fields a carrier holds."""
