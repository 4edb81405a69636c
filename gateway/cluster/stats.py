"""What one process of a cluster reports about itself (docs/cluster.md): read by
``/metrics`` (:mod:`gateway.web.metrics`) and ``commonos status``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClusterStats:
    """A snapshot of this process's part in the cluster.

    Counters count since the process started; ``last_renewal_age`` is the seconds since
    its leases were last renewed (a figure growing past ``[cluster] lease_seconds`` means
    this process is losing what it owns)."""

    process_id: str
    live_processes: int = 0
    bots_owned: tuple[str, ...] = ()
    sessions_held: int = 0
    lease_renewals: int = 0
    leases_lost: int = 0
    takeovers: int = 0
    events_forwarded: int = 0
    events_received: int = 0
    calls_relayed: int = 0
    calls_served: int = 0
    mail_reconnects: int = 0
    last_renewal_age: float = 0.0
