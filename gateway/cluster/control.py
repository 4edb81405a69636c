"""The dashboard's actions on a turn another process runs: mail kind ``control``.

With several processes on one PostgreSQL store (docs/cluster.md §"The dashboard") a
session's turn runs on the holder of its lease ``session:<key>``. Chat commands and
presses reach that process as forwarded events (:mod:`gateway.cluster.sink`); the
dashboard's Stop, steer and Approve / Deny reach it through :class:`ClusterControl`:

* **sending side** (the process whose dashboard was used): when another live process
  holds the session, Stop and steer are mailed to it (``{"action": "stop" | "steer",
  "session_key", "text"}``) and the answer is ``{"ok": true, "remote": <process id>}``.
  An approval pending on another process is decided *here, in the store*: the resolver is
  checked against the same rule as a local decision (the requester, or an approver of the
  session: :meth:`core.approvals.Approvals.approvers_of`) — a resolver who may not is
  refused and nothing is mailed —, then ``resolve_approval`` (compare-and-set) records
  the outcome and the resolver, so the HTTP answer is the store's verdict (``resolved``
  or ``already_decided``), and ``{"action": "wake", "approval_id"}`` is mailed to the
  holder;
* **holder side** (:meth:`ClusterControl.on_mail`): ``stop`` is the router's stop (the
  chat's one "Stopped" notice), ``steer`` the dispatcher's, exactly as its own dashboard;
  ``wake`` reads the approval back from the store and settles the waiting request with
  the stored outcome and resolver (``Approvals.resolve``, so the same approver rule runs
  again here and the card is edited as if pressed). The mail never says on its own
  authority who may approve: the store row, written by a checked resolver, does.

The store's answer wins over the holder's: an approval that timed out on the holder in the
instant between the store's decision and the wake keeps its stored outcome while its turn
went on as timed out (a window as wide as one mail's delivery, against a timeout of
minutes). The holder's own compare-and-set then finds the row decided with this very
outcome and resolver, which is no conflict and is not logged.

The dashboard's state reads the store too (:meth:`running_turns`, :meth:`pending`):
every process's running turns with their ``process_id`` and the pending approvals with the
process holding each one's session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.approvals import RESTART_BY, ResolveOutcome, ResolveResult
from core.store.base import ApprovalRecord
from core.store.fencing import fenced
from gateway.cluster.leases import Leases
from gateway.cluster.mailbox import Mail, Mailbox
from gateway.cluster.sink import session_lease

if TYPE_CHECKING:
    from core.store.postgres import PgStore
    from gateway.service import GatewayService

logger = logging.getLogger(__name__)

CONTROL = "control"
"""The mail kind of a dashboard action sent to the process running the session."""

_RUNNING = """SELECT s.key, t.process_id, t.started_at, t.iterations
    FROM turns AS t JOIN sessions AS s ON s.id = t.session_id
    WHERE t.status = 'running' ORDER BY s.key"""


@dataclass(frozen=True, slots=True)
class RunningTurn:
    """A turn the store says is running, and the process that started it."""

    session_key: str
    process_id: str | None
    started_at: float
    iterations: int


class ControlError(ValueError):
    """A control mail that does not say what to do (logged, dropped)."""


class ClusterControl:
    """Dashboard actions across processes (module docstring)."""

    def __init__(self, store: PgStore, leases: Leases, mailbox: Mailbox, process_id: str) -> None:
        self.store, self.leases, self.mailbox = store, leases, mailbox
        self.process_id = process_id
        self.service: GatewayService | None = None
        """This process's service, once the node started (the holder side needs it)."""
        self.received = 0
        """Control mails taken (counted as each is taken, before it is applied)."""

    def attach(self, service: GatewayService) -> None:
        self.service = service

    # sending side ---------------------------------------------------------------------------
    async def owner(self, session_key: str) -> str | None:
        """The other live process holding ``session_key``; None when it is this one's or
        nobody's (act locally then)."""
        holder = await self.leases.holder(session_lease(session_key))
        if holder is None or not holder.live or holder.owner == self.process_id:
            return None
        return holder.owner

    async def stop(self, session_key: str) -> str | None:
        """Mail Stop to the session's holder; its process id, or None when local."""
        return await self._mail_action(session_key, {"action": "stop"})

    async def steer(self, session_key: str, text: str) -> str | None:
        """Mail a steer to the session's holder; its process id, or None when local."""
        return await self._mail_action(session_key, {"action": "steer", "text": text})

    async def _mail_action(self, session_key: str, action: dict[str, Any]) -> str | None:
        owner = await self.owner(session_key)
        if owner is not None:
            await self._send(owner, {**action, "session_key": session_key})
        return owner

    async def decide(
        self,
        approval_id: str,
        outcome: ResolveOutcome,
        by: str,
        approvers: Callable[[str], frozenset[str]],
    ) -> ResolveResult:
        """Decide an approval not pending here, in the store (module docstring).
        ``approvers``: who may approve a session's requests, as here (the same config runs
        everywhere); ``by`` is refused unless it is one of them or the requester."""
        record = await self.store.get_approval(approval_id)
        if record is None:
            return "unknown"
        if record.state != "pending":
            return "cancelled_by_restart" if record.resolved_by == RESTART_BY else "already_decided"
        if by != record.requested_by and by not in approvers(record.session_key):
            return "forbidden"
        with fenced(None):
            if not await self.store.resolve_approval(approval_id, outcome, by):
                return "already_decided"
            owner = await self.owner(record.session_key)
            if owner is not None:
                await self._send(owner, {"action": "wake", "approval_id": approval_id})
        return "resolved"

    async def _send(self, owner: str, payload: dict[str, Any]) -> None:
        with fenced(None):
            await self.mailbox.send(owner, CONTROL, json.dumps(payload))

    # what the store says --------------------------------------------------------------------
    async def running_turns(self) -> list[RunningTurn]:
        """Every process's running turns (the store's ``turns.process_id``)."""
        rows = await self.store.pool.fetch(_RUNNING)
        return [
            RunningTurn(
                str(r["key"]), r["process_id"], float(r["started_at"]), int(r["iterations"])
            )
            for r in rows
        ]

    async def pending(self) -> list[tuple[ApprovalRecord, str | None]]:
        """Pending approvals with the live process holding each one's session (None when
        nobody does: its turn is over or its process gone)."""
        records = await self.store.pending_approvals()
        holders: dict[str, str | None] = {}
        for record in records:
            if record.session_key not in holders:
                holder = await self.leases.holder(session_lease(record.session_key))
                live = holder is not None and holder.live
                holders[record.session_key] = holder.owner if holder and live else None
        return [(record, holders[record.session_key]) for record in records]

    # holder side ----------------------------------------------------------------------------
    async def on_mail(self, mail: Mail) -> None:
        """Apply a control mail as this process's own dashboard would; a mail that does
        not parse is logged and dropped."""
        self.received += 1
        try:
            await self._apply(_parse(mail.payload))
        except ControlError as exc:
            logger.warning(
                "cluster: control mail %d from %s dropped: %s", mail.id, mail.sender, exc
            )

    async def _apply(self, payload: dict[str, str]) -> None:
        service = self.service
        if service is None:
            raise ControlError("this process has not started")
        action = payload["action"]
        if action == "stop":
            await service.router.stop(payload["session_key"])
        elif action == "steer":
            service.dispatcher.steer(payload["session_key"], payload["text"])
        elif action == "wake":
            await self._wake(service, payload["approval_id"])
        else:
            raise ControlError(f"unknown action {action!r}")

    async def _wake(self, service: GatewayService, approval_id: str) -> None:
        """Settle the waiting request with what the store recorded."""
        record = await self.store.get_approval(approval_id)
        if record is None or service.approvals.get(approval_id) is None:
            return
        if record.state in ("approved", "denied") and record.resolved_by:
            outcome: ResolveOutcome = "approved" if record.state == "approved" else "denied"
            await service.approvals.resolve(approval_id, outcome, record.resolved_by)


_FIELDS = {"stop": ("session_key",), "steer": ("session_key", "text"), "wake": ("approval_id",)}


def _parse(payload: str) -> dict[str, str]:
    try:
        data = json.loads(payload)
    except ValueError:
        raise ControlError("not JSON") from None
    if not isinstance(data, dict) or data.get("action") not in _FIELDS:
        raise ControlError("expected an object with an action: stop, steer or wake")
    needed = _FIELDS[str(data["action"])]
    if not all(isinstance(data.get(name), str) for name in needed):
        raise ControlError(f"{data['action']}: expected {', '.join(needed)}")
    return {name: str(data[name]) for name in ("action", *needed)}
