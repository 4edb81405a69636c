"""Scheduled turns on a running test gateway (README "Scheduled turns"): the feature put
on the service as the wiring does with ``[schedule] enabled``, but on a manual clock the
test moves (no occurrence waits for real time)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.config.schedule import ScheduleSection
from gateway.schedule.feature import ScheduleFeature
from gateway.service import GatewayService
from tests.support.manual_clock import ManualClock

START = datetime(2027, 1, 15, 8, 0, tzinfo=ZoneInfo("UTC")).timestamp()  # a Friday, 08:00


async def scheduled(
    service: GatewayService, clock: ManualClock | None = None, owner: str = "test",
    **config: object,
) -> tuple[ScheduleFeature, ManualClock]:  # fmt: skip
    """The started feature on ``service`` and its clock (a new one at :data:`START`)."""
    if clock is None:
        clock = ManualClock()
        clock.now_s = START
    section = ScheduleSection(enabled=True, **config)  # type: ignore[arg-type]
    feature = ScheduleFeature(service, section, clock=clock.now, sleep=clock.sleep, owner=owner)
    await feature.start()
    return feature, clock


async def retimed(service: GatewayService) -> tuple[ScheduleFeature, ManualClock]:
    """The feature the wiring put on ``service`` (``[schedule] enabled``), started again
    on a manual clock at :data:`START`."""
    feature = next(p for p in service.parts if isinstance(p, ScheduleFeature))
    await feature.aclose()
    clock = ManualClock()
    clock.now_s = START
    feature.use_clock(clock.now, clock.sleep)
    await feature.start()
    return feature, clock
