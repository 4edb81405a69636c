"""Who approves where, and who may always talk to the bot.

(The feature modules — links, pairing, reactions, the bot guard — reach the inbound path
as stages of its fold, :mod:`gateway.inbound.stages`, built by
:meth:`gateway.service.GatewayService.start` with only the stages that are on.)

:class:`ApproverRule` is who may answer a session's approval cards: the approvers of its
platform, platform-qualified (:func:`gateway.control.access.qualified`), and the operators; for a
linked session the person's own identities and their platforms' approvers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from adapters.session_keys import parse_session_key
from gateway.control.access import AccessPolicy, qualified
from gateway.control.links import LINK_PLATFORM, Links


def with_approvers(
    access: Mapping[str, AccessPolicy], approvers: Mapping[str, frozenset[str]]
) -> dict[str, AccessPolicy]:
    """Approvers may always talk to the bot (and press its buttons)."""
    platforms = set(access) | set(approvers)
    return {
        p: replace(
            access.get(p, AccessPolicy()),
            approvers=access.get(p, AccessPolicy()).approvers | approvers.get(p, frozenset()),
        )
        for p in platforms
    }


class ApproverRule:
    """A session's approvers: ``approvers`` holds bare ids per platform, ``operators``
    platform-qualified ids who approve everywhere, ``links`` the linked identities."""

    def __init__(
        self, approvers: Mapping[str, frozenset[str]], operators: frozenset[str], links: Links
    ) -> None:
        self._qualified = {
            platform: frozenset(qualified(platform, user) for user in users)
            for platform, users in approvers.items()
        }
        self._operators = operators
        self._links = links

    def __call__(self, session_key: str) -> frozenset[str]:
        """The session's platform's approvers, platform-qualified like every requester and
        presser (``"telegram:42"``): an id configured for one platform approves only there."""
        key = parse_session_key(session_key)
        if key.platform == LINK_PLATFORM:
            return self._linked(key.chat_id)
        own = self._qualified.get(key.platform, frozenset())
        return own | self._operators

    def _linked(self, person: str) -> frozenset[str]:
        """A linked session's: the person's own identities (the same person on each
        platform), the approvers of their platforms and the operators."""
        members = self._links.members(person)
        platforms = {member.partition(":")[0] for member in members}
        configured = (self._qualified.get(p, frozenset()) for p in platforms)
        return members.union(*configured) | self._operators
