"""Relaying a bot's outbound calls to the process that owns the bot (docs/cluster.md).

Only the owner of a bot's lease talks to that platform as that bot, so its budget is exact.
A turn running on another process makes its calls as always, to the bot's
:class:`gateway.outbound.pipeline.Outbound`, whose relay stage
(:class:`gateway.cluster.relay_stage.RelayStage`) hands them here, raw, before anything of
its fold runs, while this process does not own the bot::

    requester                                   owner (serves target "bot:<platform>:<id>")
    Relay.perform(bot, call)
      mail "call" {"id", "call", "trace"} ─────► executor: decode, perform through the
                                                 owner's Outbound (scheduler, redaction,
      on_result ◄──── mail "result" {"id",       counters, 429 holds), answer the outcome
                       "outcome"} to the sender  (the message, None, or the error)

The requester's future is keyed by the call's id; the outcome is decoded by
:mod:`gateway.cluster.codec`, so an error comes back as the same class with the same
message (a :class:`RateLimited` the owner gave up on stays given up). No answer within
``timeout`` seconds, or the relay closing while a call waits, is an ``AdapterError``.

The owner answers *every* call it took, errors included (a call it cannot read, a call
that raised something outside the adapter error tree), so a requester only ever times out
when the owner is gone. Its answer is unfenced: the call was made, whatever became of the
lease since. Each call is performed in its own task: the owner's scheduler sees relayed
calls side by side (its priorities and coalescing apply across them), while the mailbox
keeps handing the next mail. ``trace`` carries the asker's span (W3C trace context,
:func:`core.tracing.carrier`; empty with telemetry off), so the owner's ``platform.call``
span is part of the asking turn's trace.

**A store that cannot be reached** (a database outage or restart) loses no call: the
mail — a call, or the owner's answer — is kept in memory and sent again (backoff from
``BACKOFF_FIRST`` to ``BACKOFF_MAX`` seconds) until the store takes it, at most
``outage_wait`` seconds; only then is the call an ``AdapterError``. A send cut off by the
outage may have been stored after all, so the same call can arrive twice: the owner
makes a call id once (a second copy is dropped; the first one's answer settles it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from adapters.base import AdapterError, SentMessage
from adapters.calls import Call, SendFile
from core import tracing
from core.bounded import BoundedMap
from core.store.fencing import fenced
from core.store.pg_connection import DRIVER_ERRORS, unavailable
from core.tasks import TaskSet
from gateway.cluster.codec import decode_call, decode_outcome, encode_call, encode_outcome
from gateway.cluster.mailbox import Mail, Mailbox, Receive

logger = logging.getLogger(__name__)

CALL, RESULT = "call", "result"
"""The mail kinds: a relayed call (to a bot's lease name), its outcome (to a process id)."""
DRAIN_SECONDS = 5.0
"""How long :meth:`Relay.aclose` lets calls being performed for others finish and answer."""
OUTAGE_WAIT = 120.0
"""How long a mail waits in memory for a store that cannot be reached."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0
MADE_CALLS = 10_000
"""Call ids the owner remembers having made, to make a call sent twice once."""

Perform = Callable[[Call], Awaitable[SentMessage | None]]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class RelayStats:
    """Counters since start: calls relayed to an owner (and how many got no answer), calls
    performed for another process."""

    relayed: int = 0
    timeouts: int = 0
    served: int = 0
    held: int = 0
    """Mail kept in memory while the store could not be reached (sent once it was)."""
    twice: int = 0
    """Calls that arrived a second time (a send cut off by an outage), made once."""


class Relay:
    """This process's side of relaying: asking an owner, and answering as one."""

    def __init__(
        self,
        mailbox: Mailbox,
        process_id: str,
        *,
        timeout: float = 60.0,
        spool: Path | None = None,
        outage_wait: float = OUTAGE_WAIT,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """``spool``: where files relayed to this process as owner land until sent (a
        temporary directory by default); ``sleep`` waits between tries while the store
        cannot be reached."""
        self.process_id = process_id
        self.timeout = timeout
        self.outage_wait = outage_wait
        self._sleep = sleep
        self._made: BoundedMap[str, bool] = BoundedMap(MADE_CALLS)
        self.stats = RelayStats()
        self._mailbox = mailbox
        self._own_spool = spool is None
        self._spool = (
            spool or Path(tempfile.gettempdir()) / f"commonos-relay-{secrets.token_hex(4)}"
        )
        self._prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[str]] = {}
        self._serving = TaskSet(logger)
        self._closed = False

    # requester ----------------------------------------------------------------------------
    async def perform(self, bot: str, call: Call) -> SentMessage | None:
        """Make ``call`` through the owner of ``bot`` (a bot lease name); its outcome."""
        if self._closed:
            raise AdapterError(f"{_what(call)} to {call.chat.platform} not relayed: stopping")
        call_id = f"{self._prefix}-{next(self._ids)}"
        encoded = await _encode(call)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        try:
            mail = {"id": call_id, "call": encoded, "trace": tracing.carrier()}
            await self._send(bot, call, json.dumps(mail))
            try:
                outcome = await asyncio.wait_for(future, self.timeout)
            except TimeoutError:
                self.stats.timeouts += 1
                raise AdapterError(
                    f"the owner of {call.chat.platform} did not answer "
                    f"{_what(call)} within {self.timeout:g}s"
                ) from None
        finally:
            self._waiting.pop(call_id, None)
        return decode_outcome(outcome)

    async def _send(self, bot: str, call: Call, payload: str) -> None:
        """Mail the call (under the caller's fence: Fenced passes through, nothing sent);
        a store that cannot take it within ``outage_wait`` is an AdapterError like any
        failed call."""
        try:
            await self._mail(bot, CALL, payload)
        except DRIVER_ERRORS as exc:
            raise AdapterError(
                f"{_what(call)} to {call.chat.platform} not relayed: the store did not take "
                f"it ({type(exc).__name__})"
            ) from None
        self.stats.relayed += 1

    async def on_result(self, mail: Mail) -> None:
        """A ``result`` mail to this process: settle the call waiting for it (a result for
        a call that gave up waiting is dropped)."""
        try:
            data = json.loads(mail.payload)
            call_id, outcome = data["id"], data["outcome"]
            if not isinstance(call_id, str) or not isinstance(outcome, str):
                raise TypeError("id and outcome must be strings")
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "relay: result mail %d from %s unreadable: %s", mail.id, mail.sender, exc
            )
            return
        future = self._waiting.get(call_id)
        if future is None or future.done():
            logger.info("relay: a late result from %s (call %s) dropped", mail.sender, call_id)
            return
        future.set_result(outcome)

    # owner --------------------------------------------------------------------------------
    def executor(self, perform: Perform) -> Receive:
        """The receiver of a bot's lease name on its owner: each ``call`` mail is made with
        ``perform`` (the owner's ``Outbound.perform``) and its outcome mailed back."""

        async def receive(mail: Mail) -> None:
            if mail.kind != CALL:
                logger.warning(
                    "relay: mail %d of kind %r to %s ignored", mail.id, mail.kind, mail.target
                )
                return
            self._serving.spawn(self._serve(mail, perform), name=f"relay-call-{mail.id}")

        return receive

    async def _serve(self, mail: Mail, perform: Perform) -> None:
        call_id = _call_id(mail.payload)
        if call_id is None:
            logger.warning(
                "relay: call mail %d from %s has no id; not answered", mail.id, mail.sender
            )
            return
        if self._made.get(call_id):
            self.stats.twice += 1
            logger.info("relay: call %s from %s came twice; made once", call_id, mail.sender)
            return
        self._made.put(call_id, True)
        outcome = await self._outcome(mail, perform)
        self.stats.served += 1
        payload = json.dumps({"id": call_id, "outcome": encode_outcome(outcome)})
        with fenced(None):  # the call was made: its outcome goes back whoever holds the lease
            await self._mail(mail.sender, RESULT, payload)

    async def _mail(self, target: str, kind: str, payload: str) -> None:
        """Send one mail; while the store cannot be reached it is kept and sent again
        (backoff), for at most ``outage_wait`` seconds; other errors raise at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.outage_wait
        delay, held = BACKOFF_FIRST, False
        while True:
            try:
                await self._mailbox.send(target, kind, payload)
                return
            except DRIVER_ERRORS as exc:
                if not _outage(exc) or self._closed or loop.time() + delay > deadline:
                    raise
                if not held:
                    held = True
                    self.stats.held += 1
                    logger.warning(
                        "relay: the store cannot take %s mail to %s (%s); kept until it can",
                        kind, target, type(exc).__name__,
                    )  # fmt: skip
            await self._sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _outcome(self, mail: Mail, perform: Perform) -> SentMessage | AdapterError | None:
        try:
            call = await asyncio.to_thread(
                decode_call, json.loads(mail.payload)["call"], self._spool
            )
        except (ValueError, KeyError, TypeError, OSError) as exc:
            logger.warning("relay: call mail %d from %s unreadable: %s", mail.id, mail.sender, exc)
            return AdapterError(f"the owner could not read the relayed call: {exc}")
        try:
            with tracing.joined(json.loads(mail.payload).get("trace")):  # the asker's trace
                return await perform(call)
        except AdapterError as exc:
            return exc
        except Exception as exc:
            logger.exception("relay: %s for %s failed", _what(call), mail.sender)
            return AdapterError(
                f"{_what(call)} failed at the bot's owner: {type(exc).__name__}: {exc}"
            )
        finally:
            if isinstance(call, SendFile):
                await asyncio.to_thread(_remove, call.file.path)

    async def aclose(self, grace: float = DRAIN_SECONDS) -> None:
        """Relay no more: calls waiting for an owner fail with AdapterError; calls being
        made for others get ``grace`` seconds to finish and answer."""
        self._closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(AdapterError("the relay closed before the owner answered"))
        await self._serving.aclose(grace)
        if self._own_spool:
            shutil.rmtree(self._spool, ignore_errors=True)


async def _encode(call: Call) -> str:
    """A file's bytes are read off the event loop; other calls are encoded in place."""
    if isinstance(call, SendFile):
        return await asyncio.to_thread(encode_call, call)
    return encode_call(call)


def _outage(exc: BaseException) -> bool:
    """The store cannot be reached now (not this process's own pool, closed for good)."""
    return unavailable(exc) and "pool is closed" not in str(exc)


def _call_id(payload: str) -> str | None:
    try:
        call_id = json.loads(payload)["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return call_id if isinstance(call_id, str) else None


def _remove(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def _what(call: Call) -> str:
    """The call's kind for messages and logs (never its text)."""
    return type(call).__name__
