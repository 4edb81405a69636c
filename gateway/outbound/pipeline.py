"""The outbound pipeline: every call a bot makes passes one fold of middlewares, built once.

A call is a frozen value (:mod:`adapters.calls`). Each bot has one :class:`Outbound`, made
when its adapter is attached (:class:`gateway.outbound.directory.ChatDirectory`), whose
:meth:`Outbound.perform` runs a call through::

    schedule   the bot's OutboundScheduler (gateway.outbound.scheduler): its budget, the call's
               priority and coalescing key, the one retry layer for 429s
    redact     every text and button label through core.redaction.redact
    count      the gateway's traffic counters (gateway.web.metrics), when it has them
    adapter.perform(call)

all of it inside a ``platform.call`` span (:func:`traced`; no-op unless traces are on).

A bot another process of a cluster may own (docs/cluster.md) has one more stage, the
cluster's :class:`Relay` (:class:`gateway.cluster.relay_stage.RelayStage`), at both ends::

    not owned here   relay.mail(call)       the raw call, by mail, to the bot's owner, whose
                                            own fold schedules, redacts and counts it (once)
    owned here       schedule → redact → count → relay → adapter.perform(call)
                     (last: a call whose lease went stale waits for the renewal, or is
                     mailed to the new owner when the lease was lost meanwhile)

A middleware is ``async (call, next) -> result`` (``next`` bound by name, once), composed
once like Starlette's ``build_middleware_stack``; one that changes a call passes
``dataclasses.replace(call, ...)`` on. Nothing wraps the adapter. The scheduler comes
first so that every attempt it makes (a retry after a 429) passes redaction and is
counted again, and so that a :class:`Latest` call, decided only when the budget lets it
start, is redacted like any other.

How each call is scheduled (docs/architecture.md, "The outbound pipeline")::

    Send, Edit    awaited at the call's priority (REPLY unless it says otherwise)
    AnswerPress   awaited, URGENT
    Typing        awaited, CLEANUP, one waiting per chat (coalesced), never retried
    Delete        queued at CLEANUP and never awaited: perform returns at once
    LiveText      awaited at the call's priority: PROGRESS for the web's live text,
                  STREAM for a streamed answer (gateway.turns.streaming), coalesced by its key;
                  its end (a seal, or "" clearing it) is its own kind, "seal", charged
                  only in the windows that count it
    Latest        its call's priority; what is sent is asked for when it starts, so a
                  progress state or a streamed answer is never a stale one
                  (gateway.turns.progress, gateway.turns.streaming)

Inbound events pass the bot too (:meth:`Outbound.received`, called by the router, the sink
of every adapter): the scheduler learns each chat's kind, the traffic counters count it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, overload

from adapters.base import (
    Adapter,
    AdapterError,
    ButtonRows,
    CallKind,
    ChatRef,
    InboundEvent,
    SentMessage,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    Priority,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.health import Health
from core import tracing
from core.redaction import redact
from gateway.outbound.scheduler import OutboundScheduler

Perform = Callable[[Call], Awaitable[SentMessage | None]]
"""The rest of the pipeline, from a middleware's place to the adapter."""


class Middleware(Protocol):
    async def __call__(self, call: Call, next: Perform) -> SentMessage | None: ...


class Relay(Middleware, Protocol):
    """The cluster's stage of a leased bot (module docstring): consulted first, it says
    whether this process owns the bot; as the last middleware it hands an owned call to
    the adapter."""

    @property
    def owned(self) -> bool: ...

    async def mail(self, item: Outgoing) -> SentMessage | None:
        """``item`` made by the bot's owner, by mail, raw (nothing here schedules,
        redacts or counts it)."""
        ...


class Traffic(Middleware, Protocol):
    """A middleware that also sees every inbound event (the gateway's counters)."""

    def received(self, event: InboundEvent) -> None: ...


@dataclass(frozen=True, slots=True)
class Latest:
    """``call``, brought up to date when the budget lets it start: ``newest()`` gives the
    call to make then (None: nothing is left to make). ``call`` says where it goes, its
    priority and what kind of call it is."""

    call: Send | Edit | LiveText
    newest: Callable[[], Send | Edit | LiveText | None]

    @property
    def chat(self) -> ChatRef:
        return self.call.chat


Outgoing = Call | Latest


def fold(middlewares: Sequence[Middleware], perform: Perform) -> Perform:
    """``middlewares[0]`` first, each handing on to the next, the last to ``perform``
    (each bound to its ``next`` once: a call enters no frame between two middlewares)."""
    for middleware in reversed(middlewares):
        perform = partial(middleware, next=perform)
    return perform


# redact ---------------------------------------------------------------------------------
async def redact_call(call: Call, next: Perform) -> SentMessage | None:
    """Every text and button label redacted before the platform sees it, plain or in the
    platform's markup alike (a reply was also redacted as Markdown before it was rendered,
    see :mod:`gateway.outbound.delivery`)."""
    match call:
        case Send() | Edit():
            buttons = _clean(call.buttons) if call.buttons else call.buttons
            call = replace(call, text=redact(call.text), buttons=buttons)
        case SendFile():
            call = replace(call, caption=redact(call.caption))
        case AnswerPress(text=str() as text):
            call = replace(call, text=redact(text))
        case LiveText():
            call = replace(call, text=redact(call.text))
    return await next(call)


def _clean(rows: ButtonRows) -> ButtonRows:
    return tuple(tuple(replace(b, label=redact(b.label)) for b in row) for row in rows)


# schedule -------------------------------------------------------------------------------
KINDS: dict[type, tuple[CallKind, str]] = {
    Send: ("send", "message"), SendFile: ("send", "file"), Edit: ("edit", "edit"),
    Delete: ("delete", "delete"),
    AnswerPress: ("answer", "button answer"), Typing: ("typing", "typing"),
    LiveText: ("live", "live text"), React: ("react", "reaction"),
}  # fmt: skip
"""Each call's kind (which of the platform's windows it is charged to,
``Capabilities.charges``) and its name in the scheduler's log lines."""


async def schedule(
    scheduler: OutboundScheduler, item: Outgoing, next: Perform
) -> SentMessage | None:
    """``item`` once its bot's budget allows it (see the table at the top). The scheduler
    makes it in its caller's context, so under the caller's fence
    (:mod:`core.store.fencing`), not that of whichever call started the scheduler's task:
    a relayed call is refused once its session moved."""
    run: Callable[[], Awaitable[SentMessage | None]]
    if isinstance(item, Latest):
        call: Call = item.call
        run = partial(_newest, item, next)
    else:
        call = item
        run = partial(next, call)
    chat, (kind, what) = call.chat, KINDS[type(call)]
    if isinstance(call, LiveText) and _ends_stream(call):
        kind = "seal"  # charged only where the platform counts it (a Slack stopStream)
    if isinstance(item, Latest):
        what = "stream" if call.priority == Priority.STREAM else "progress"
    if isinstance(call, Delete | React):
        scheduler.later(run, chat=chat, priority=call.priority, what=what, kind=kind)
        return None
    if isinstance(call, Typing):
        key = call.coalesce or ("typing", chat.platform, chat.chat_id)
        return await scheduler.run(
            run, chat=chat, priority=call.priority, what=what, coalesce=key, attempts=1,
            kind=kind,
        )  # fmt: skip
    return await scheduler.run(
        run, chat=chat, priority=call.priority, what=what, coalesce=call.coalesce, kind=kind
    )


def _ends_stream(call: LiveText) -> bool:
    """A seal, or the "" that clears a stream: Telegram makes no call for either."""
    return call.mode == "seal" or (call.mode == "replace" and not call.text)


async def _newest(item: Latest, next: Perform) -> SentMessage | None:
    call = item.newest()
    return None if call is None else await next(call)


async def unscheduled(item: Outgoing, next: Perform) -> SentMessage | None:
    """The head of a pipeline without a scheduler (a bare adapter in a unit test)."""
    if isinstance(item, Latest):
        return await _newest(item, next)
    return await next(item)


# trace ----------------------------------------------------------------------------------
async def traced(
    platform: str, perform: Callable[[Outgoing], Awaitable[SentMessage | None]], item: Outgoing
) -> SentMessage | None:
    """``item`` as a ``platform.call`` span (:mod:`core.tracing`) in the caller's trace:
    the platform and the call's kind (a failure marks it by the error's type, never its
    text). Outside the scheduler, whose calls run in its own tasks: the span covers the
    wait for the budget too; a queued Delete or React ends when it is queued."""
    if tracing.tracer is None:  # telemetry off: no span, no call into core/tracing.py
        return await perform(item)
    call = item.call if isinstance(item, Latest) else item
    kind, _ = KINDS[type(call)]
    with tracing.span("platform.call", platform=platform, **{"call.kind": kind}):
        return await perform(item)


async def _here_or_mailed(
    relay: Relay,
    here: Callable[[Outgoing], Awaitable[SentMessage | None]],
    item: Outgoing,
) -> SentMessage | None:
    """Owned here: this process's fold; else the owner's, by mail (module docstring)."""
    if relay.owned:
        return await here(item)
    return await relay.mail(item)


# one bot --------------------------------------------------------------------------------
class Outbound:
    """One bot's way out: its adapter at the end of the fold (``adapter`` itself is still
    there for its lifecycle: ``start``, ``stop``, ``health``)."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        scheduler: OutboundScheduler | None = None,
        middlewares: Sequence[Middleware] = (redact_call,),
        traffic: Traffic | None = None,
        relay: Relay | None = None,
    ) -> None:
        """``relay``: the cluster's stage when another process may own the bot."""
        self.adapter = adapter
        self.platform: str = adapter.platform
        self.capabilities = adapter.capabilities
        self.scheduler = scheduler
        self.relay = relay
        self._traffic = traffic
        last = [stage for stage in (traffic, relay) if stage is not None]
        rest = fold([*middlewares, *last], adapter.perform)
        head = unscheduled if scheduler is None else partial(schedule, scheduler)
        here: Callable[[Outgoing], Awaitable[SentMessage | None]] = partial(head, next=rest)
        if relay is not None:
            here = partial(_here_or_mailed, relay, here)
        self._perform = partial(traced, self.platform, here)

    @classmethod
    def paced(
        cls, adapter: Adapter, traffic: Traffic | None = None, relay: Relay | None = None
    ) -> Outbound:
        """The gateway's pipeline for ``adapter``: schedule → redact → count → adapter
        (with ``relay``: mailed first when another process owns the bot, the relay stage
        last when this one does)."""
        scheduler = OutboundScheduler(adapter.capabilities)
        return cls(adapter, scheduler=scheduler, traffic=traffic, relay=relay)

    @property
    def health(self) -> Health:
        return self.adapter.health

    @overload
    async def perform(self, call: Send | SendFile) -> SentMessage: ...

    @overload
    async def perform(self, call: Outgoing) -> SentMessage | None: ...

    async def perform(self, call: Outgoing) -> SentMessage | None:
        """Make ``call``: a ``Send`` returns the message that arrived, the rest None."""
        result = await self._perform(call)
        if isinstance(call, Send | SendFile) and result is None:
            raise AdapterError(f"{self.platform}: a send returned no message")
        return result

    def received(self, event: InboundEvent) -> None:
        """An event came in from this bot's platform (before it is routed)."""
        if self.scheduler is not None:
            self.scheduler.learn(event)
        if self._traffic is not None:
            self._traffic.received(event)

    async def aclose(self) -> None:
        """Refuse new calls, fail the waiting ones (before the adapter stops)."""
        if self.scheduler is not None:
            await self.scheduler.aclose()
