"""What the gateway service asks of this process's cluster node (docs/cluster.md).

:class:`gateway.service.GatewayService` knows a cluster only through :class:`ClusterPart`
(set as ``service.cluster`` when the store is PostgreSQL; None with SQLite, where nothing
of the cluster runs): the inbound stage ``cluster_claim`` (claim-or-forward), the start
once the adapters started, the stop once turns and adapters stopped, and whether a
finished turn's session is still this process's (the turns know only that last question,
as :class:`gateway.turns.runner.LostSession`). :class:`gateway.cluster.node.ClusterNode`
is the one implementation.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from gateway.inbound.stages import Stage

Service = TypeVar("Service", contravariant=True)
"""What the node is started with: the service (named by the service, not imported here,
so this module does not import the service that imports it)."""


class ClusterPart(Protocol[Service]):
    @property
    def claim(self) -> Stage:
        """The inbound stage ``cluster_claim``: claim-or-forward, second in the fold."""
        ...

    async def start(self, service: Service) -> None:
        """Once the adapters started: join, take the free bots, beat."""
        ...

    async def stop(self) -> None:
        """Once turns and adapters stopped: give up bots and sessions, leave."""
        ...

    async def fenced_out(self) -> bool:
        """The session of the work running in this context is no longer this process's
        (the server says so: a paused process's local view may not know yet)."""
        ...
