"""An async hook registry borrowing pluggy's rules.

* Hooks are called in registration order (lower ``priority`` first, ties by order).
* ``notify``: observers; an exception is logged and never breaks the caller.
* ``first_result``: decision hooks stop at the first non-``None`` result (pluggy
  ``firstresult``); an exception in a decision hook propagates — a broken policy must
  not silently allow a dangerous call.
* ``transform``: each hook may return a replacement value (``None`` keeps it); chained.
* ``collect``: all non-``None`` results in order (e.g. ``pre_llm_call`` context).

Hook functions may be sync or async; every hook is called with keyword arguments only,
and must accept ``**kwargs`` so new arguments can be added later.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from core.hooks.spec import HOOK_NAMES

logger = logging.getLogger(__name__)

HookFn = Callable[..., Any]
T = TypeVar("T")


class UnknownHookError(ValueError):
    """A hook was registered under a name that is not in the spec."""


@dataclass(frozen=True, slots=True)
class _Registration:
    fn: HookFn
    priority: int
    order: int
    source: str


class HookRegistry:
    def __init__(self) -> None:
        self._hooks: dict[str, list[_Registration]] = {}
        self._counter = 0

    def register(self, name: str, fn: HookFn, *, priority: int = 100, source: str = "") -> None:
        if name not in HOOK_NAMES:
            raise UnknownHookError(f"unknown hook {name!r}; known: {', '.join(sorted(HOOK_NAMES))}")
        self._counter += 1
        entries = self._hooks.setdefault(name, [])
        entries.append(_Registration(fn, priority, self._counter, source or _describe(fn)))
        entries.sort(key=lambda r: (r.priority, r.order))

    def has(self, name: str) -> bool:
        return bool(self._hooks.get(name))

    def sources(self, name: str) -> list[str]:
        return [r.source for r in self._hooks.get(name, [])]

    async def notify(self, name: str, **kwargs: Any) -> None:
        for reg in self._hooks.get(name, []):
            try:
                await _call(reg.fn, kwargs)
            except Exception:
                logger.warning("hook %s (%s) failed; ignored", name, reg.source, exc_info=True)

    async def first_result(self, name: str, **kwargs: Any) -> Any:
        for reg in self._hooks.get(name, []):
            result = await _call(reg.fn, kwargs)
            if result is not None:
                return result
        return None

    async def transform(self, name: str, value: T, **kwargs: Any) -> T:
        for reg in self._hooks.get(name, []):
            try:
                replaced = await _call(reg.fn, {**kwargs, "value": value})
            except Exception:
                logger.warning("hook %s (%s) failed; ignored", name, reg.source, exc_info=True)
                continue
            if replaced is not None:
                value = replaced
        return value

    async def collect(self, name: str, **kwargs: Any) -> list[Any]:
        results: list[Any] = []
        for reg in self._hooks.get(name, []):
            try:
                result = await _call(reg.fn, kwargs)
            except Exception:
                logger.warning("hook %s (%s) failed; ignored", name, reg.source, exc_info=True)
                continue
            if result is not None:
                results.append(result)
        return results


async def _call(fn: HookFn, kwargs: dict[str, Any]) -> Any:
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def _describe(fn: HookFn) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
