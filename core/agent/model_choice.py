"""The session's model: which :class:`~core.model.base.ModelClient` a turn talks to.

A :class:`CommonAgent` has its profile's model. The gateway may give it a
:data:`ModelChooser` (``/model NAME``, docs/turn-loop.md §21): an async callable asked for
a session key's :class:`ModelChoice` — None keeps the profile's own. It is asked

* when a turn opens: the choice's ``vision`` decides whether the user's images go to the
  model as image parts (:mod:`core.agent.attachment_content`) and its ``stream`` whether
  the turn's requests stream;
* before every model call of the turn (:class:`SessionModel`): a switch made while a turn
  runs reaches the model server from its next call, with the new model name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.model.base import ModelClient, ModelRequest
from core.types import ModelReply


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A session's model: its client (which names the model), and what it can do."""

    client: ModelClient
    vision: bool
    stream: bool


ModelChooser = Callable[[str], Awaitable[ModelChoice | None]]
"""``choose(session_key)``: the session's model, or None for the profile's own."""


class SessionModel:
    """A :class:`ModelClient` that asks ``choose`` for the session's client at each call
    (``fallback`` when it answers None). It owns no client: :meth:`aclose` does nothing."""

    def __init__(self, session_key: str, choose: ModelChooser, fallback: ModelClient) -> None:
        self._key, self._choose, self._fallback = session_key, choose, fallback
        self._current = fallback

    @property
    def model(self) -> str:
        """The model name of the last call (before any: the profile's)."""
        return self._current.model

    async def complete(self, request: ModelRequest) -> ModelReply:
        choice = await self._choose(self._key)
        self._current = choice.client if choice is not None else self._fallback
        return await self._current.complete(request)

    async def aclose(self) -> None:
        return None
