"""Reading a TOML table into a frozen section: the machinery under :mod:`adapters.config`.

A :class:`Table` subclass is a frozen, keyword-only dataclass whose annotations say how
each key is read (docs/architecture.md §6). A key's annotation is a plain kind (``str``,
``int``, ``float``, ``bool``, ``Path``, a ``Literal``, ``tuple[X, ...]``,
``frozenset[X]``, ``dict[str, X]``, another table, ``X | None``), optionally wrapped in
``Annotated[X, Check(fn)]``: ``fn`` gets the raw value (and the :class:`ReadContext` when
it takes two arguments) and returns what is then read as ``X``, or raises
:func:`invalid` with the message the user reads. ``Check(fn, after=True)`` runs on the
value read.

:meth:`Table.read` reads a whole table and reports every problem at once, each with the
path of its key (:class:`TableInvalid`); the loader (``gateway.config``) prefixes the file.
The readers of a class are built at its first read, once; constructing a table directly
(``TelegramSection(token=...)``, as tests do) checks nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, dataclass_transform

Loc = tuple[str | int, ...]
"""Where a value sits: its key, then keys and array indexes inside it."""
Reader = Callable[[object, Loc, "ReadContext"], object]
HIDDEN = "hidden"
"""Field metadata: a key the loader fills in, never listed (``check-config``, docs)."""


# messages --------------------------------------------------------------------------------
def show(value: object) -> str:
    """A TOML-looking rendering of a value, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array" if value else "an empty array"
    return str(value)


def got(value: object) -> str:
    """``got "x" (string)``: the value and its TOML type."""
    if isinstance(value, dict | list | tuple):
        return f"got {show(value)}"
    kinds = {bool: "boolean", int: "integer", float: "float", str: "string"}
    return f"got {show(value)} ({kinds.get(type(value), type(value).__name__)})"


def suggest(value: object, options: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean "x"?)`` when one option is close to ``value``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(options), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def unknown_key(key: str, value: object, known: list[str] | tuple[str, ...]) -> str:
    """``unknown key (did you mean "x"?)`` (``unknown section`` for a table)."""
    what = "unknown section" if isinstance(value, dict) else "unknown key"
    return f"{what}{suggest(key, sorted(known))}"


class InvalidValue(ValueError):
    """A value a key cannot take; ``message`` is what the user reads."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def invalid(message: str) -> InvalidValue:
    """The error a value check raises: ``message`` is what the user reads."""
    return InvalidValue(message)


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem of a table: the key path and the message."""

    loc: Loc
    message: str


class TableInvalid(ValueError):
    """A table could not be read; ``issues`` holds every problem, in the table's order."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("; ".join(f"{_dotted(i.loc)}: {i.message}" for i in issues))
        self.issues = issues


def _dotted(loc: Loc) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _fail(loc: Loc, message: str) -> TableInvalid:
    return TableInvalid([Issue(loc, message)])


# checks ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadContext:
    """What a check may need besides the value: where relative paths start, the env."""

    base_dir: Path
    env: Mapping[str, str]

    @classmethod
    def here(cls) -> ReadContext:
        """Relative paths from the working directory, no env (a table read by a test)."""
        return cls(Path.cwd(), {})


class Check:
    """``Annotated[X, Check(fn)]``: ``fn`` turns the raw value into one read as ``X``."""

    __slots__ = ("after", "fn", "wants_context")

    def __init__(self, fn: Callable[..., Any], *, after: bool = False) -> None:
        self.fn = fn
        self.after = after
        self.wants_context = len(inspect.signature(fn).parameters) == 2

    def __call__(self, value: object, context: ReadContext) -> object:
        return self.fn(value, context) if self.wants_context else self.fn(value)


# readers, one per annotation -------------------------------------------------------------
def reader_for(hint: object) -> Reader:
    """How a value of the annotation ``hint`` is read (built once per key)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        inner, *extras = typing.get_args(hint)
        return _annotated(reader_for(inner), [c for c in extras if isinstance(c, Check)])
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(hint))
    if origin is Literal:
        return _literal(typing.get_args(hint))
    if origin is tuple or origin is frozenset:
        item, *rest = typing.get_args(hint)
        assert origin is frozenset or rest == [Ellipsis], f"unsupported {hint}"
        return _array(reader_for(item), origin)
    if origin is dict:
        return _mapping(reader_for(typing.get_args(hint)[1]))
    if hint is Any or hint is object:
        return lambda value, loc, context: value
    if isinstance(hint, type) and issubclass(hint, Table):
        return hint._read_nested
    if isinstance(hint, type) and hint in _PLAIN:
        return _plain(hint)
    raise TypeError(f"no reader for the annotation {hint!r}")


def _annotated(read: Reader, checks: list[Check]) -> Reader:
    before = [check for check in checks if not check.after]
    after = [check for check in checks if check.after]

    def annotated(value: object, loc: Loc, context: ReadContext) -> object:
        value = _checked(before, value, loc, context)
        return _checked(after, read(value, loc, context), loc, context)

    return annotated


def _checked(checks: list[Check], value: object, loc: Loc, context: ReadContext) -> object:
    """``value`` through ``checks``; a ValueError a check lets through (a path with a NUL
    byte, say) is a problem of the key too, named with the value."""
    raw = value
    try:
        for check in checks:
            value = check(value, context)
    except InvalidValue as exc:
        raise _fail(loc, exc.message) from None
    except ValueError as exc:
        raise _fail(loc, f"{exc}, {got(raw)}") from None
    return value


def _union(members: tuple[object, ...]) -> Reader:
    nullable = type(None) in members
    readers = [reader_for(member) for member in members if member is not type(None)]

    def union(value: object, loc: Loc, context: ReadContext) -> object:
        if value is None and nullable:
            return None
        first: TableInvalid | None = None
        for read in readers:
            try:
                return read(value, loc, context)
            except TableInvalid as exc:
                first = first or exc
        assert first is not None
        raise first

    return union


def _literal(options: tuple[object, ...]) -> Reader:
    assert all(isinstance(option, str) for option in options), f"unsupported {options}"
    expected = ", ".join(json.dumps(option) for option in options)

    def literal(value: object, loc: Loc, context: ReadContext) -> object:
        if isinstance(value, str) and value in options:
            return value
        names = [str(option) for option in options]
        raise _fail(loc, f"expected one of {expected}, {got(value)}{suggest(value, names)}")

    return literal


def _array(read: Reader, kind: type) -> Reader:
    def array(value: object, loc: Loc, context: ReadContext) -> object:
        if not isinstance(value, list | tuple | set | frozenset):
            raise _fail(loc, f"expected an array, {got(value)}")
        items, issues = [], []
        for index, item in enumerate(value):
            try:
                items.append(read(item, (*loc, index), context))
            except TableInvalid as exc:
                issues += exc.issues
        if issues:
            raise TableInvalid(issues)
        return kind(items)

    return array


def _mapping(read: Reader) -> Reader:
    def mapping(value: object, loc: Loc, context: ReadContext) -> object:
        if not isinstance(value, Mapping):
            raise _fail(loc, f"expected a table, {got(value)}")
        read_values, issues = {}, []
        for key, item in value.items():
            try:
                read_values[key] = read(item, (*loc, key), context)
            except TableInvalid as exc:
                issues += exc.issues
        if issues:
            raise TableInvalid(issues)
        return read_values

    return mapping


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_PLAIN: dict[type, tuple[Callable[[object], bool], str]] = {
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (_is_number, "a number"),
    Path: (lambda v: isinstance(v, str | Path), "a path"),
}


def _plain(kind: type) -> Reader:
    accepts, what = _PLAIN[kind]

    def plain(value: object, loc: Loc, context: ReadContext) -> object:
        if not accepts(value):
            raise _fail(loc, f"expected {what}, {got(value)}")
        return value if type(value) is kind else kind(value)

    return plain


# tables ----------------------------------------------------------------------------------
def hidden_field(default: object, *, repr: bool = True) -> Any:
    """A key the loader fills in (a profile's name): readable, never listed."""
    return dataclasses.field(default=default, repr=repr, metadata={HIDDEN: True})


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(typing.cast(Any, cls))


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Table:
    """A frozen, keyword-only dataclass read from one TOML table; unknown keys are errors."""

    __readers: typing.ClassVar[dict[type, dict[str, Reader]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)

    @classmethod
    def read(cls, data: Mapping[str, object], context: ReadContext | None = None) -> Self:
        """The table read from ``data``; raises :class:`TableInvalid` with every problem."""
        return cls._read(data, (), context or ReadContext.here())

    @classmethod
    def prepared(cls, data: dict[str, Any], context: ReadContext) -> dict[str, Any]:
        """``data`` before its keys are read: keys implied by others, from the env."""
        return data

    @classmethod
    def listed_keys(cls) -> tuple[str, ...]:
        """The keys a file may set, in their declared order (hidden ones left out)."""
        return tuple(f.name for f in _fields(cls) if not f.metadata.get(HIDDEN))

    @classmethod
    def fallback(cls) -> Self:
        """Every key at its default (a required one None): what stands for a table that
        failed, so the loader can go on and report the rest."""
        table = object.__new__(cls)
        for f in _fields(cls):
            value = f.default
            if value is dataclasses.MISSING:
                factory = f.default_factory
                value = None if factory is dataclasses.MISSING else factory()
            object.__setattr__(table, f.name, value)
        return table

    @classmethod
    def _readers(cls) -> dict[str, Reader]:
        readers = Table.__readers.get(cls)
        if readers is None:
            hints = typing.get_type_hints(cls, include_extras=True)
            readers = {f.name: reader_for(hints[f.name]) for f in _fields(cls)}
            Table.__readers[cls] = readers
        return readers

    @classmethod
    def _read_nested(cls, value: object, loc: Loc, context: ReadContext) -> object:
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise _fail(loc, f"expected a table, {got(value)}")
        return cls._read(value, loc, context)

    @classmethod
    def _read(cls, data: Mapping[str, object], loc: Loc, context: ReadContext) -> Self:
        readers = cls._readers()
        data = cls.prepared(dict(data), context)
        values, issues = {}, []
        for key, read in readers.items():
            if key in data:
                try:
                    values[key] = read(data[key], (*loc, key), context)
                except TableInvalid as exc:
                    issues += exc.issues
        for f in _fields(cls):
            required = f.default is f.default_factory is dataclasses.MISSING
            if required and f.name not in data:
                issues.append(Issue((*loc, f.name), "missing: this key is required"))
        known = cls.listed_keys()
        for key, value in data.items():
            if key not in readers:
                issues.append(Issue((*loc, key), unknown_key(key, value, known)))
        if issues:
            raise TableInvalid(issues)
        return cls(**values)
