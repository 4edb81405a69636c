"""The router: the sink every adapter delivers its :class:`InboundEvent` values to.

Plain text becomes a turn (``Dispatcher.submit``); everything else is the *control
plane* and acts at once, never queued behind a running turn: ``/stop``, ``/steer``,
``/redirect``, ``/approve``, ``/deny``, ``/status``, ``/new``, button presses and the
platforms' own Stop controls on a streamed answer (``kind == "stop"``: ``/stop`` for the
running turn, silent when none runs; docs/architecture.md §13).

* The router is the home of four stages of the inbound fold (:mod:`gateway.inbound.stages`):
  ``received`` (every event first passes its bot, :meth:`ChatDirectory.received`: the
  scheduler learns the chat's kind, the traffic is counted, once, whatever becomes of it),
  ``press``, ``record`` (every admitted event records where its session lives,
  :class:`ChatDirectory`, so the reply, the progress view and approval cards find the chat)
  and the last, :meth:`Router.dispatch`. Access, pairing, the bot guard, the rekeying of a
  linked DM and the status reactions are stages of their own modules, in the list only
  when on; a stranger gets no turn, a button press from a stranger is refused politely.
* A button press is answered (an ``AnswerPress`` call) exactly once, whatever happens.
* A message with files carries them *offered* (``UserMessage.attachments``): they are
  downloaded in its turn's lane (:mod:`gateway.turns.intake`), only for an admitted sender, and
  such a message queues rather than steer a running turn.
* A message queued behind a running turn is acknowledged ("⏳ Queued …"), at most once
  per ``ack_interval`` seconds per session.
* Receipts: an event that becomes a turn hands its :class:`~adapters.base.Receipt` the
  turn's ``handled`` outcome (:class:`core.dispatcher.SubmitOutcome`): True once the reply
  was delivered, False when a shutdown cut it short. Anything else — a command, a press,
  a folded or refused message, a stranger's — is handled whole when the router returns,
  and its receipt is settled True then (``docs/architecture.md`` §3 step 10).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from adapters.base import InboundEvent
from adapters.calls import AnswerPress
from core.agent.profile import BusyPolicy
from core.agent.turn import UserMessage
from core.approvals import Approvals
from core.dispatcher import Dispatcher, SubmitOutcome
from core.store.base import Store
from gateway.control.access import AccessControl, user_of
from gateway.control.commands import (
    ChatCommands,
    CommandHandler,
    Reply,
    SessionContext,
)
from gateway.control.syntax import (
    COMMANDS,
    ApprovalPress,
    ChoicePress,
    CommandInfo,
    StopPress,
    command_menu,
    parse_press,
)
from gateway.inbound.stages import Next
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import ChatDirectory, origin_of
from gateway.outbound.messages import (
    ACKS,
    NO_LONGER_VALID,
    RESOLVE_ANSWERS,
    SOMETHING_WENT_WRONG,
    STRANGER,
    stopped,
)
from gateway.outbound.pipeline import Outbound
from gateway.turns.stops import StopButtons, StoppedTurns

logger = logging.getLogger(__name__)

ACK_INTERVAL = 30.0
MAX_ACK_KEYS = 10_000


class Router:
    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        approvals: Approvals,
        store: Store,
        access: AccessControl,
        directory: ChatDirectory,
        delivery: Delivery,
        stopped: StoppedTurns,
        stop_buttons: StopButtons,
        ack_interval: float = ACK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        context: SessionContext | None = None,
        policy_for: Callable[[str], BusyPolicy] | None = None,
    ) -> None:
        self._dispatcher, self._approvals = dispatcher, approvals
        self._access, self._directory = access, directory
        self._delivery = delivery
        self._commands = ChatCommands(
            dispatcher, approvals, store, self.submit_text, stopped, directory, context
        )
        self.stop_buttons = stop_buttons
        """The Stop buttons of running turns' progress messages (the turns show them)."""
        self._ack_interval, self._clock = ack_interval, clock
        self._policy_for = policy_for
        self._last_ack: dict[str, float] = {}

    @property
    def access(self) -> AccessControl:
        """Who may use the bot (a scheduled turn checks its creator at run time)."""
        return self._access

    @property
    def session_ended(self) -> list[Callable[[str], Awaitable[None]]]:
        """Told of each session ``/new`` ended, by key (``ChatCommands.session_ended``)."""
        return self._commands.session_ended

    @property
    def command_handlers(self) -> dict[str, CommandHandler]:
        """Where a feature module adds its chat commands by name (``/pair``, ``/link``,
        ``/model`` ...): run like the built-ins, after the access check."""
        return self._commands.extra

    @property
    def commands(self) -> tuple[CommandInfo, ...]:
        """The command menu (name without ``/``, description) for adapters to register."""
        return COMMANDS

    @property
    def command_menu(self) -> tuple[tuple[str, str], ...]:
        """The same menu as ``(name, description)`` pairs."""
        return command_menu()

    # stages of the inbound fold (gateway.inbound.stages) ------------------------------
    async def received(self, event: InboundEvent, next: Next) -> None:
        """Stage ``received``, first: the bot learns the chat's kind and counts the event
        (:meth:`ChatDirectory.received`), once, whatever becomes of it. Never raises: a
        failure is logged and the adapter goes on. The event's receipt is settled as it
        returns, unless a turn took it over."""
        try:
            self._directory.received(event)
            await next(event)
        except Exception:
            logger.exception("event %s:%s could not be handled", event.platform, event.update_id)
        finally:
            event.receipt.sink_returned()

    async def press(self, event: InboundEvent, next: Next) -> None:
        """Stage ``press``: a button press is answered here, exactly once (it checks access
        itself); every other event goes on."""
        if event.kind == "button":
            await self._press(event)
        else:
            await next(event)

    async def record(self, event: InboundEvent, next: Next) -> None:
        """Stage ``record``: where an admitted event's session lives (the reply, the
        progress view and approval cards find the chat), who its sender is."""
        self._directory.record(event)
        await next(event)

    async def dispatch(self, event: InboundEvent) -> None:
        """The last stage: the platform's Stop control, a command, or text for a turn."""
        if event.kind == "stop":
            await self._native_stop(str(event.session_key))
        elif event.kind == "command" and event.command:
            reply = await self._commands.run(event)
            await self._say(event, reply)
        else:
            await self.submit_text(event, event.text)

    async def stop(self, session_key: str) -> bool:
        """``/stop`` for ``session_key`` from outside its chat (the dashboard's Stop): the
        same stop as the command, and the chat gets the same one notice of what it ended
        and dropped (:func:`gateway.outbound.messages.stopped`). False (and no notice) when nothing
        was running or queued."""
        outcome = self._commands.stop(session_key)
        if not outcome:
            return False
        place = self._directory.place(session_key)
        if place is not None:
            await self._delivery.notice(place.outbound, place.chat, stopped(outcome))
        return True

    async def _native_stop(self, session_key: str) -> None:
        """The platform's own Stop on a live streamed answer (``kind == "stop"``): ``/stop``
        for the session's running turn, with its one notice; nothing at all when none runs
        (the stream it stopped belonged to a turn that already ended)."""
        if self._dispatcher.status(session_key).running:
            await self.stop(session_key)

    async def submit_text(
        self, event: InboundEvent, text: str, *, policy: BusyPolicy | None = None
    ) -> Reply:
        """Start (or queue) a turn with ``text``; acknowledges a queued message itself.

        The message carries ``event``'s origin (``"<platform>:<update id>"``, how a replay
        finds what it stored) and its offered files, downloaded in the turn's lane
        (docs/attachments.md); ``event``'s receipt follows how the message ends."""
        if not text.strip() and not event.attachments:
            return None
        origin = origin_of(event)
        message = UserMessage(
            text, sender_id=user_of(event), sender_name=event.sender.name, origin=origin,
            attachments=event.attachments,
        )  # fmt: skip
        key = str(event.session_key)
        if message.attachments:
            policy = self._unfolded(key, policy)
        merge = event.kind == "text"  # a plain message may wait to merge; commands never
        outcome = self._dispatcher.submit(key, message, policy=policy, merge=merge)
        if outcome.handled is not None:
            event.receipt.follow(outcome.handled)
        if outcome.kind in ACKS:  # started at once: nothing to say
            await self._acknowledge(event, key, outcome)
        return None

    def _unfolded(self, key: str, policy: BusyPolicy | None) -> BusyPolicy | None:
        """A message with files is never folded into a running turn as a steer (its files
        must be taken in first): it queues instead."""
        wanted = policy or (self._policy_for(key) if self._policy_for else None)
        return "queue" if wanted in (None, "steer") else wanted

    async def _acknowledge(self, event: InboundEvent, key: str, outcome: SubmitOutcome) -> None:
        notice = ACKS[outcome.kind]
        now = self._clock()
        last = self._last_ack.pop(key, None)
        if outcome.kind == "queued" and last is not None and now - last < self._ack_interval:
            self._last_ack[key] = last
            return
        self._last_ack[key] = now
        if len(self._last_ack) > MAX_ACK_KEYS:
            self._last_ack.pop(next(iter(self._last_ack)))
        await self._say(event, notice)

    async def _say(self, event: InboundEvent, reply: Reply) -> None:
        outbound = self._directory.outbound(event.platform)
        if reply and outbound is not None:
            await self._delivery.notice(outbound, event.chat, reply)

    # buttons --------------------------------------------------------------------------
    async def _press(self, event: InboundEvent) -> None:
        outbound = self._directory.outbound(event.platform)
        if outbound is None:
            logger.error("button press from unknown platform %s", event.platform)
            return
        answer: str | None = SOMETHING_WENT_WRONG
        try:
            answer = await self._decide_press(event)
        finally:
            await _answer(outbound, event, answer)

    async def _decide_press(self, event: InboundEvent) -> str | None:
        verdict = self._access.check(event)
        if verdict == "deny":
            return STRANGER
        if verdict == "ignore":
            return None
        self._directory.remember_sender(event)
        press = parse_press(event.button_data)
        if press is None:
            return NO_LONGER_VALID
        if isinstance(press, StopPress):
            return self.stop_buttons.press(press.stop_id, user_of(event), self._dispatcher)
        result = await self._resolve(press, user_of(event))
        return RESOLVE_ANSWERS.get(result)

    async def _resolve(self, press: ApprovalPress | ChoicePress, by: str) -> str:
        """``by`` is platform-qualified. Permission is checked (by ``Approvals.resolve``)
        before anything else, so a stranger's press reveals nothing about the request."""
        if isinstance(press, ApprovalPress):
            return await self._approvals.resolve(
                press.approval_id, press.outcome, by, always=press.always
            )
        request = self._approvals.get(press.approval_id)
        choices = request.choices if request is not None else ()
        choice = choices[press.index] if press.index < len(choices) else None
        return await self._approvals.resolve(press.approval_id, "approved", by, choice=choice)


async def _answer(outbound: Outbound, event: InboundEvent, text: str | None) -> None:
    try:
        await outbound.perform(AnswerPress(event, text))
    except Exception:
        logger.warning("answering button press %s failed", event.press_id, exc_info=True)
