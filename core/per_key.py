"""Settings given either as one value for every session key or as a function of the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

T = TypeVar("T")

PerKey: TypeAlias = Callable[[str], T] | T
"""A value for every session key, or ``key -> value``."""


def per_key(setting: PerKey[T]) -> Callable[[str], T]:
    """``setting`` as a function of the session key."""
    if callable(setting):
        return setting
    return lambda _key: setting
