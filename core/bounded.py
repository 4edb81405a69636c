"""A mapping that forgets: at most ``capacity`` entries, least recently put dropped first."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(OrderedDict[K, V]):
    """An ``OrderedDict`` kept to ``capacity`` entries by :meth:`put`.

    ``put`` makes its key the most recent and drops the oldest entries past the capacity;
    reads (``get``, ``in``) do not reorder. Plain item assignment is not bounded: use
    ``put``."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def put(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)
