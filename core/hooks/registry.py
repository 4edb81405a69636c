"""An async hook registry borrowing pluggy's rules.

* Hooks are called in registration order (lower ``priority`` first, ties by order).
* ``notify``: observers; an exception is logged and never breaks the caller.
* ``first_result``: decision hooks stop at the first non-``None`` result (pluggy
  ``firstresult``); an exception in a decision hook propagates — a broken policy must
  not silently allow a dangerous call.
* ``transform``: each hook may return a replacement value (``None`` keeps it); chained.
* ``collect``: all non-``None`` results in order (e.g. ``pre_llm_call`` context).
* ``decide``: every non-``None`` result of a decision hook, combined by precedence
  (:func:`by_precedence`: any ``Block`` wins, then ``AskUser``, then ``Modify``); an
  exception propagates, as for ``first_result``.

Hook functions may be sync or async; every hook is called with keyword arguments only,
and must accept ``**kwargs`` so new arguments can be added later.

**Time boxes.** Each async hook function is awaited for at most ``time_box`` seconds
(:data:`HOOK_SECONDS` unless the registry was built with another); past that it is
cancelled and abandoned (:meth:`CancellationToken.time_boxed`). For an observer, a
transform or a collector that counts as a failure (logged, ignored); for a decision hook
``first_result`` raises ``TimeoutError`` (the caller blocks the call). A *sync* hook that
blocks the event loop cannot be boxed: hooks must not block.

**The turn's token.** The registry does not know the turn; the engine runs each dispatch
through :func:`under_token`: ``/stop`` aborts a hook that hangs at once, and a hook fired
after the stop (``agent_loop_stopped``, ``on_session_end``, the after-call hooks of a
cancelled tool) gets :data:`AFTER_STOP_SECONDS` instead.

**What is not registered costs nothing.** :attr:`HookRegistry.live` holds the names with at
least one hook: the engine skips a dispatch (and building its arguments) for any other
name, so a hook point nobody registered for costs no call on the turn's path
(``docs/turn-loop.md`` §7). :attr:`HookRegistry.awaiting` holds the names with at least one
``async`` hook: only those have anything a token or a time box could cut, so a name whose
hooks are all sync (the gateway's metrics) is dispatched directly.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from core.cancellation import CancellationToken
from core.hooks.results import AskUser, Block, Modify
from core.hooks.spec import HOOK_NAMES

logger = logging.getLogger(__name__)

HookFn = Callable[..., Any]
T = TypeVar("T")

HOOK_SECONDS = 10.0
"""Default time box for one async hook function."""

AFTER_STOP_SECONDS = 0.2
"""Time box for a whole hook dispatch that runs after the turn's token was cancelled."""


class UnknownHookError(ValueError):
    """A hook was registered under a name that is not in the spec."""


@dataclass(frozen=True, slots=True)
class _Registration:
    fn: HookFn
    priority: int
    order: int
    source: str


class HookRegistry:
    def __init__(self, *, time_box: float = HOOK_SECONDS) -> None:
        self._hooks: dict[str, list[_Registration]] = {}
        self._counter = 0
        self.time_box = time_box
        """Seconds one async hook function may take (see the module docstring)."""
        self.live: frozenset[str] = frozenset()
        """The names with at least one hook; a dispatch of any other name is skipped."""
        self.awaiting: frozenset[str] = frozenset()
        """The names with at least one ``async`` hook (dispatched under the token, boxed)."""

    def register(self, name: str, fn: HookFn, *, priority: int = 100, source: str = "") -> None:
        if name not in HOOK_NAMES:
            raise UnknownHookError(f"unknown hook {name!r}; known: {', '.join(sorted(HOOK_NAMES))}")
        self._counter += 1
        entries = self._hooks.setdefault(name, [])
        entries.append(_Registration(fn, priority, self._counter, source or _describe(fn)))
        entries.sort(key=lambda r: (r.priority, r.order))
        self.live |= {name}
        if not _plain(fn):
            self.awaiting |= {name}

    def has(self, name: str) -> bool:
        return bool(self._hooks.get(name))

    def guarded(self, name: str, token: CancellationToken, work: Awaitable[T]) -> Awaitable[T]:
        """``work`` (a dispatch of ``name``) under ``token`` (``guard``: ``/stop`` aborts it)
        when a hook of ``name`` is async; as it is when all are sync — nothing to abort."""
        return token.guard(work) if name in self.awaiting else work

    def sources(self, name: str) -> list[str]:
        return [r.source for r in self._hooks.get(name, [])]

    async def notify(self, name: str, **kwargs: Any) -> None:
        for reg in self._hooks.get(name, []):
            try:
                await self._call(reg, kwargs)
            except Exception as error:
                _log_failure(name, reg, error)

    async def first_result(self, name: str, **kwargs: Any) -> Any:
        for reg in self._hooks.get(name, []):
            result = await self._call(reg, kwargs)
            if result is not None:
                return result
        return None

    async def transform(self, name: str, value: T, **kwargs: Any) -> T:
        for reg in self._hooks.get(name, []):
            try:
                replaced = await self._call(reg, {**kwargs, "value": value})
            except Exception as error:
                _log_failure(name, reg, error)
                continue
            if replaced is not None:
                value = replaced
        return value

    async def decide(self, name: str, **kwargs: Any) -> Verdict:
        """Every hook's result, combined by :func:`by_precedence`: all hooks are asked, so
        a later ``Block`` beats an earlier ``AskUser``. An exception propagates."""
        results: list[Any] = []
        for reg in self._hooks.get(name, []):
            result = await self._call(reg, kwargs)
            if result is not None:
                results.append(result)
        return by_precedence(results)

    async def collect(self, name: str, **kwargs: Any) -> list[Any]:
        results: list[Any] = []
        for reg in self._hooks.get(name, []):
            try:
                result = await self._call(reg, kwargs)
            except Exception as error:
                _log_failure(name, reg, error)
                continue
            if result is not None:
                results.append(result)
        return results

    async def _call(self, reg: _Registration, kwargs: dict[str, Any]) -> Any:
        result = reg.fn(**kwargs)
        if inspect.isawaitable(result):
            try:
                result = await CancellationToken.time_boxed(result, self.time_box)
            except TimeoutError:
                raise HookTimedOut(f"{reg.source} took longer than {self.time_box:g}s") from None
        return result


class InvalidDecision(ValueError):
    """A decision hook returned something that is not a decision (or a ``Modify`` whose
    ``args`` are not a dict); ``result`` is what it returned."""

    def __init__(self, result: object) -> None:
        super().__init__(f"invalid decision: {result!r}")
        self.result = result


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the decision hooks said together (see :func:`by_precedence`)."""

    block: Block | None = None
    ask: AskUser | None = None
    changes: dict[str, Any] | None = None
    """Every ``Modify``'s ``args`` merged in hook order (a later hook wins per key)."""


def by_precedence(results: Sequence[object]) -> Verdict:
    """Combine decision results: the first ``Block`` wins over everything; else the
    ``AskUser`` prompts (joined) stand together with the merged ``Modify`` changes — the
    caller applies the changes and asks about the modified call. Raises
    :class:`InvalidDecision` for a result that is none of these."""
    blocks: list[Block] = []
    prompts: list[str] = []
    changes: dict[str, Any] = {}
    for result in results:
        if isinstance(result, Block):
            blocks.append(result)
        elif isinstance(result, AskUser):
            prompts.append(result.prompt)
        elif isinstance(result, Modify) and isinstance(result.args, dict):
            changes.update(result.args)
        else:
            raise InvalidDecision(result)
    if blocks:
        return Verdict(block=blocks[0])
    ask = AskUser("\n\n".join(dict.fromkeys(prompts))) if prompts else None
    return Verdict(ask=ask, changes=changes or None)


class HookTimedOut(TimeoutError):
    """An async hook function overran the registry's time box and was abandoned."""


async def under_token(token: CancellationToken, work: Awaitable[T]) -> T:
    """A hook dispatch ``/stop`` can abort (``Cancelled``); fired after the stop, a short
    time box instead (``TimeoutError`` past :data:`AFTER_STOP_SECONDS`)."""
    if not token.cancelled:
        return await token.guard(work)
    return await CancellationToken.time_boxed(work, AFTER_STOP_SECONDS)


def _log_failure(name: str, reg: _Registration, error: Exception) -> None:
    if isinstance(error, HookTimedOut):
        logger.warning("hook %s: %s; abandoned", name, error)
        return
    logger.warning("hook %s (%s) failed; ignored", name, reg.source, exc_info=error)


def _plain(fn: HookFn) -> bool:
    """A sync function or method: nothing in its dispatch awaits (one that still returns
    an awaitable has it awaited boxed by ``time_box``, not under the turn's token)."""
    inner = inspect.unwrap(fn)
    plain = inspect.isfunction(inner) or inspect.ismethod(inner)
    return plain and not inspect.iscoroutinefunction(inner)


def _describe(fn: HookFn) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
