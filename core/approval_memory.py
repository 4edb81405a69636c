""" "Always for this session": approvals a person asked us to remember.

An approval given with ``always=True`` remembers the pair (tool, normalised arguments) for
the session: its key, and the id of the session the key had then; a later identical request
of that same session is approved without asking. Normalised means the ``command`` argument
with whitespace collapsed when there is one, else the arguments as canonical JSON — an
exact match, never a prefix: approving ``rm -rf build`` does not approve ``rm -rf /``.

A new session under the key (``/new``) remembers nothing of the old one's, whichever
process ran the ``/new`` (several processes on PostgreSQL, docs/cluster.md: a session's
turns move between processes, each with its own memory). The memory is bounded: least
recently used sessions are dropped past ``max_sessions``, and a session remembers at most
``max_per_session`` pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from core.approver import ApprovalRequest
from core.bounded import BoundedMap

MAX_REMEMBERED_SESSIONS = 1000
MAX_REMEMBERED_PER_SESSION = 100

Fingerprint = tuple[str, str]


@dataclass(slots=True)
class _Remembered:
    session_id: str
    """The session (of the key) the pairs were approved in."""
    pairs: set[Fingerprint] = field(default_factory=set)


class ApprovalMemory:
    """Per session key, the (tool, arguments) pairs approved "always" in its session."""

    def __init__(
        self,
        max_sessions: int = MAX_REMEMBERED_SESSIONS,
        max_per_session: int = MAX_REMEMBERED_PER_SESSION,
    ) -> None:
        self._max_per_session = max_per_session
        self._sessions: BoundedMap[str, _Remembered] = BoundedMap(max_sessions)

    def approves(self, request: ApprovalRequest) -> bool:
        """True when an identical request was approved "always" in the same session."""
        remembered = self._sessions.get(request.session_key)
        if remembered is None or remembered.session_id != request.session_id:
            return False
        self._sessions.put(request.session_key, remembered)
        return fingerprint(request) in remembered.pairs

    def remember(self, request: ApprovalRequest) -> None:
        remembered = self._sessions.get(request.session_key)
        if remembered is None or remembered.session_id != request.session_id:
            remembered = _Remembered(request.session_id)  # a new session forgets the old's
        if len(remembered.pairs) < self._max_per_session:
            remembered.pairs.add(fingerprint(request))
        self._sessions.put(request.session_key, remembered)

    def forget(self, session_key: str) -> None:
        """Drop everything the session remembered (``/new``)."""
        self._sessions.pop(session_key, None)


def fingerprint(request: ApprovalRequest) -> Fingerprint:
    """What "identical" means: the tool and its normalised arguments."""
    command = request.arguments.get("command")
    if isinstance(command, str):
        return request.tool, " ".join(command.split())
    return request.tool, json.dumps(request.arguments, sort_keys=True, default=str)
