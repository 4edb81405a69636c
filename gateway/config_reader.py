"""Reading one TOML table with validation that collects every error.

A :class:`Table` wraps a parsed TOML table and its dotted key path. Each typed accessor
returns a valid value (or the default) and, when the file's value is wrong, records an
error naming the file, the key path and what was expected, so a user sees all problems
at once. :meth:`Table.finish` reports keys nobody read as unknown, with a "did you mean"
suggestion when one is close.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

S = TypeVar("S", bound=str)

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class ErrorLog:
    """The errors of one config file, each rendered ``<file>: <key path>: <message>``."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []

    def add(self, path: str, message: str) -> None:
        where = f"{self.source}: {path}" if path else self.source
        self.errors.append(f"{where}: {message}")


def show(value: object) -> str:
    """A TOML-looking rendering of a value, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array" if value else "an empty array"
    return str(value)


def _kind(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "float", str: "string"}
    return names.get(type(value), type(value).__name__)


def got(value: object) -> str:
    """``got "x" (string)``: the value and its TOML type, for a value of the wrong type."""
    if isinstance(value, dict | list):
        return f"got {show(value)}"
    return f"got {show(value)} ({_kind(value)})"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Table:
    """One table of the config file being read."""

    def __init__(self, data: Mapping[str, object], path: str, log: ErrorLog) -> None:
        self._data = data
        self.path = path
        self.log = log
        self._read: set[str] = set()

    def key_path(self, key: str) -> str:
        part = key if _NAME.match(key) else json.dumps(key, ensure_ascii=False)
        return f"{self.path}.{part}" if self.path else part

    def error(self, key: str, message: str) -> None:
        self.log.add(self.key_path(key), message)

    def has(self, key: str) -> bool:
        return key in self._data

    def names(self) -> list[str]:
        return list(self._data)

    def raw(self, key: str) -> object:
        """The value as parsed (marking the key as known); None when absent."""
        self._read.add(key)
        return self._data.get(key)

    # tables -----------------------------------------------------------------
    def child(self, key: str) -> Table:
        """The sub-table ``key`` (empty when absent or not a table, which is reported)."""
        value = self.raw(key)
        if value is None:
            value = {}
        elif not isinstance(value, dict):
            self.error(key, f"expected a table, {got(value)}")
            value = {}
        return Table(value, self.key_path(key), self.log)

    def children(self) -> dict[str, Table]:
        """Every key of this table as a named sub-table (``[profiles.<name>]``)."""
        tables = {}
        for name in self.names():
            if not _NAME.match(name):
                self.error(name, "expected a name of letters, digits, '_' or '-'")
            tables[name] = self.child(name)
        return tables

    def finish(self) -> None:
        """Report every key of the table that no accessor read."""
        for key, value in self._data.items():
            if key not in self._read:
                what = "unknown section" if isinstance(value, dict) else "unknown key"
                self.error(key, f"{what}{_suggest(key, sorted(self._read))}")

    # scalars ----------------------------------------------------------------
    def string(self, key: str, default: str) -> str:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            self.error(key, f"expected a non-empty string, {got(value)}")
            return default
        return value

    def optional_string(self, key: str) -> str | None:
        return self.string(key, "") or None

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(key, f"expected true or false, {got(value)}")
            return default
        return value

    def positive_int(self, key: str, default: int) -> int:
        return self._bounded_int(key, default, 1, "a positive integer")

    def non_negative_int(self, key: str, default: int) -> int:
        return self._bounded_int(key, default, 0, "an integer ≥ 0")

    def optional_positive_int(self, key: str) -> int | None:
        return self.positive_int(key, 0) or None

    def _bounded_int(self, key: str, default: int, minimum: int, what: str) -> int:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, f"expected {what}, {got(value)}")
            return default
        if value < minimum:
            self.error(key, f"expected {what}, got {value}")
            return default
        return value

    def positive_number(self, key: str, default: float) -> float:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(key, f"expected a positive number, {got(value)}")
            return default
        if not math.isfinite(value) or value <= 0:
            self.error(key, f"expected a positive number, got {value}")
            return default
        return float(value)

    def optional_positive_number(self, key: str) -> float | None:
        return self.positive_number(key, 0.0) or None

    def choice(self, key: str, choices: tuple[S, ...], default: S) -> S:
        value = self.raw(key)
        if value is None:
            return default
        for option in choices:
            if value == option:
                return option
        expected = ", ".join(json.dumps(c) for c in choices)
        self.error(key, f"expected one of {expected}, {got(value)}{_suggest(value, choices)}")
        return default

    # collections ------------------------------------------------------------
    def strings(self, key: str) -> tuple[str, ...] | None:
        """An array of non-empty strings; None when absent."""
        value = self._array(key, _is_text, "a non-empty string")
        return None if value is None else tuple(str(v) for v in value)

    def ids(self, key: str) -> frozenset[str]:
        """User ids: an array of strings or integers, kept as strings."""
        value = self._array(key, _is_id, "a user id (string or integer)")
        return frozenset(str(v) for v in value or ())

    def _array(self, key: str, accepts: Callable[[object], bool], item: str) -> list[object] | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.error(key, f"expected an array, {got(value)}")
            return None
        for index, element in enumerate(value):
            if not accepts(element):
                self.log.add(f"{self.key_path(key)}[{index}]", f"expected {item}, {got(element)}")
                return None
        return value

    def string_map(self, key: str) -> dict[str, str]:
        """A table of string values (HTTP headers); each bad value is reported."""
        table = self.child(key)
        found = {name: table.string(name, "") for name in table.names()}
        return {name: text for name, text in found.items() if text}


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_id(value: object) -> bool:
    return (isinstance(value, str) and bool(value)) or _is_int(value)


def _suggest(value: object, options: tuple[str, ...] | list[str]) -> str:
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(options), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""
