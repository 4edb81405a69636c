"""Reading a TOML table into a frozen section (adapters/config_reader.py): every problem at
once, each at its key path, in the words the user reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Literal

import pytest

from adapters.config_reader import (
    Check,
    ReadContext,
    Table,
    TableInvalid,
    hidden_field,
    invalid,
)


def _relative(value: object, context: ReadContext) -> Path:
    if not isinstance(value, str):
        raise invalid("expected a path")
    return context.base_dir / value


def _positive(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        raise invalid(f"expected a positive integer, got {value}")
    return value


class Limits(Table):
    size: Annotated[int, Check(_positive)] = 1
    mode: Literal["fast", "slow"] = "fast"


class Server(Table):
    name: str
    where: Annotated[Path, Check(_relative)] | None = None
    args: tuple[str, ...] = ()
    tags: frozenset[str] = frozenset()
    limits: Limits = dataclasses.field(default_factory=Limits)
    filled_in: str = hidden_field("")


class Fleet(Table):
    servers: dict[str, Server] = dataclasses.field(default_factory=dict)
    enabled: bool = True
    ratio: float = 0.5


def problems(kind: type[Table], data: dict[str, object]) -> list[tuple[str, str]]:
    with pytest.raises(TableInvalid) as failed:
        kind.read(data)
    return [(".".join(map(str, issue.loc)), issue.message) for issue in failed.value.issues]


def test_a_table_is_read_into_frozen_values_of_the_declared_kinds(tmp_path: Path) -> None:
    raw = {"name": "git", "where": "srv", "args": ["a", "b"], "tags": ["x", "x"]}
    fleet = Fleet.read({"servers": {"git": raw}, "ratio": 1}, ReadContext(tmp_path, {}))
    server = fleet.servers["git"]
    assert server == Server(
        name="git", where=tmp_path / "srv", args=("a", "b"), tags=frozenset({"x"})
    )
    assert isinstance(fleet.ratio, float) and fleet.ratio == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        server.name = "other"  # type: ignore[misc]


def test_every_problem_is_reported_at_its_key_path_in_one_pass() -> None:
    data: dict[str, object] = {
        "servers": {
            "git": {"name": 3, "args": ["ok", 4], "limits": {"size": -2, "mode": "fsat"}},
            "time": {"nmae": "time"},
        },
        "enabled": "yes",
    }
    assert problems(Fleet, data) == [
        ("servers.git.name", "expected a string, got 3 (integer)"),
        ("servers.git.args.1", "expected a string, got 4 (integer)"),
        ("servers.git.limits.size", "expected a positive integer, got -2"),
        (
            "servers.git.limits.mode",
            'expected one of "fast", "slow", got "fsat" (string) (did you mean "fast"?)',
        ),
        ("servers.time.name", "missing: this key is required"),
        ("servers.time.nmae", 'unknown key (did you mean "name"?)'),
        ("enabled", 'expected true or false, got "yes" (string)'),
    ]


def test_a_table_where_a_value_is_expected_and_the_reverse_are_named() -> None:
    assert problems(Fleet, {"servers": ["git"], "ratio": True}) == [
        ("servers", "expected a table, got an array"),
        ("ratio", "expected a number, got true (boolean)"),
    ]
    assert problems(Server, {"name": "a", "limits": 3, "extra": {"k": 1}}) == [
        ("limits", "expected a table, got 3 (integer)"),
        ("extra", "unknown section"),
    ]


def test_a_hidden_key_is_readable_but_never_listed() -> None:
    assert "filled_in" not in Server.listed_keys()
    assert Server.read({"name": "a", "filled_in": "b"}).filled_in == "b"


def test_the_fallback_of_a_failed_table_has_every_default_and_none_for_a_required_key() -> None:
    fallback = Server.fallback()
    assert (fallback.name, fallback.args, fallback.limits) == (None, (), Limits())
