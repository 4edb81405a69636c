"""The turn's session hooks (``docs/turn-loop.md`` §2 steps 4 and 6): ``on_session_start``
once in a new session's first turn, ``pre_llm_call`` before the loop, and the hooks that
must fire even once the turn is stopped (``agent_loop_stopped``, ``on_session_end``),
each time-boxed under the turn's token (:func:`after_turn`).

A hook name with no hook registered is skipped where it would fire, arguments and all
(:attr:`HookRegistry.live`): the callers here check it before they call.
"""

from __future__ import annotations

import logging

from core.agent.opening import OpenTurn
from core.agent.scope import TurnScope
from core.cancellation import CancellationToken, Cancelled
from core.hooks.registry import HookRegistry, under_token

logger = logging.getLogger(__name__)


async def pre_llm_call(hooks: HookRegistry, turn: OpenTurn) -> None:
    """Step 4's ``pre_llm_call`` (after :func:`session_start`), whose context goes in front
    of the user message for the model only."""
    text = turn.message.text
    work = hooks.collect("pre_llm_call", **turn.scope.common, user_message=text)
    found = await hooks.guarded("pre_llm_call", turn.control.token, work)
    turn.transcript.model_context = "\n\n".join(str(c) for c in found if str(c))


async def session_start(hooks: HookRegistry, turn: OpenTurn) -> None:
    """``on_session_start``, once, in a new session's first turn — also one stopped or
    failed before step 4 (then from :meth:`core.agent.loop.CommonAgent._finish`), so every
    ``on_session_end`` of the session comes after it (``docs/turn-loop.md`` §2 step 4)."""
    if not turn.is_new or turn.session_started:
        return
    turn.session_started = True
    await after_turn(hooks, turn.scope, turn.control.token, "on_session_start")


async def after_turn(
    hooks: HookRegistry, scope: TurnScope, token: CancellationToken, name: str, **kwargs: object
) -> None:
    """A hook that must fire even once the turn is stopped (the after-turn hooks and
    ``on_session_start``): under the token, the whole dispatch boxed to ``time_box``
    (after a stop, to ``AFTER_STOP_SECONDS``); a stop or overrun is logged, never raised.
    Sync hooks alone have nothing to box: they are dispatched directly."""
    dispatch = hooks.notify(name, **scope.common, **kwargs)
    if name not in hooks.awaiting:
        await dispatch
        return
    try:
        await CancellationToken.time_boxed(under_token(token, dispatch), hooks.time_box)
    except (Cancelled, TimeoutError) as cut:
        why = "stopped" if isinstance(cut, Cancelled) else "timed out"
        logger.warning("turn %s: %s hook %s; going on", scope.turn_id, name, why)
