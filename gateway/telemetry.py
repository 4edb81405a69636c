"""Traces of the gateway's turns, exported by OTLP when ``[telemetry] otlp_endpoint`` is
set (issue 23 point 5; the spans themselves: :mod:`core.tracing`).

:func:`start` is called once by :class:`gateway.app.Gateway` at start: with no endpoint it
returns None and nothing else happens (OpenTelemetry is not even imported, every span
stays the port's no-op). With one it builds the OTLP provider (:mod:`gateway.otel`),
installs its tracer as the port's and returns the :class:`Telemetry` that :func:`stop`
flushes and shuts down when the gateway stops.

The spans a turn makes (all in the turn's trace; attributes never hold message text,
prompts, tool arguments, results or file names)::

    turn            core.dispatcher: session.hash (sha256 of the key, 16 hex), platform,
                    turn.id, turn.status; the reply's delivery included
    model.call      core.agent.model_call: model.name, iteration, token counts,
                    finish_reason, tool_calls (how many)
    tool.call       core.agent.tool_runner: tool.name, tool.status, tool.error,
                    approval.needed
    approval.wait   core.agent.tool_runner: approval.kind, approval.outcome
    platform.call   gateway.outbound.pipeline (each bot's outbound): call.kind, platform; a failed
                    call's status names the error's type
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core import tracing
from gateway.config.sections import TelemetrySection, mask_url

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Telemetry:
    """The installed exporter of one gateway process."""

    provider: TracerProvider
    endpoint: str


def start(section: TelemetrySection, process_id: str | None = None) -> Telemetry | None:
    """Install the OTLP tracer when ``section`` names an endpoint; None when it does not.

    ``process_id`` is the resource's ``service.instance.id`` (the cluster's process id;
    ``<host>:<pid>`` when the process has none)."""
    if section.otlp_endpoint is None:
        return None
    from gateway.otel import OtelTracer, otlp_provider

    endpoint = str(section.otlp_endpoint)
    instance = process_id or f"{socket.gethostname()}:{os.getpid()}"
    provider = otlp_provider(endpoint, section.service_name, instance)
    tracing.install(OtelTracer(provider))
    shown = mask_url(endpoint.rstrip("/"))
    log.info("traces: OTLP to %s/v1/traces as %s (%s)", shown, section.service_name, instance)
    return Telemetry(provider, endpoint)


async def stop(telemetry: Telemetry | None) -> None:
    """Spans back to no-ops; the finished ones still queued are sent (in a thread: the
    export is a blocking HTTP request, and the collector may live on this loop). A
    collector that does not answer holds this up for at most the export timeout
    (:data:`gateway.otel.EXPORT_TIMEOUT`); its spans are then dropped, logged by the SDK."""
    if telemetry is None:
        return
    tracing.install(None)
    await asyncio.to_thread(telemetry.provider.shutdown)
