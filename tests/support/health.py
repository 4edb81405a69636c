"""Waiting for a platform adapter's health to change: woken by the adapter's
:class:`~adapters.health.HealthCell` at each change, never polled."""

from __future__ import annotations

import asyncio

from adapters.health import HealthCell, HealthState

WAIT = 10.0


def cell_of(adapter: object) -> HealthCell:
    cell = getattr(adapter, "health_cell", None)
    assert isinstance(cell, HealthCell), f"{adapter!r} has no health cell"
    return cell


async def health_reaches(
    adapter: object, state: HealthState, *, after: HealthState | None = None, timeout: float = WAIT
) -> None:
    """Until ``adapter``'s health is ``state`` (and, when ``after`` is given, was ``after``
    among its recent states: e.g. ``up`` again after ``retrying``)."""

    def reached(cell: HealthCell) -> bool:
        return cell.value.state == state and (after is None or after in cell.recent)

    async with asyncio.timeout(timeout):
        await cell_of(adapter).wait_for(reached)
