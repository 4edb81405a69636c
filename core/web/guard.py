"""The SSRF guard of the web tools: which addresses a fetch may connect to.

A host name is resolved **once per connection**, every answer is checked, and the
connection is opened to the checked address itself (:class:`PinnedBackend`, an httpcore
network backend): a DNS answer that changes between the check and the connect (rebinding)
cannot switch it, because nothing is resolved a second time. TLS still names the host
(httpcore's ``start_tls`` gets the URL's host as SNI) and the ``Host`` header is the URL's.

Refused unless ``allow_hosts`` names the host or the address: loopback, link-local,
private, shared (100.64/10), multicast, unspecified, reserved and documentation ranges
(everything ``ipaddress`` does not call global), the cloud metadata addresses
(169.254.169.254, fd00:ec2::254), and the IPv4-mapped (``::ffff:a.b.c.d``), NAT64
(``64:ff9b::/96``), 6to4 and Teredo forms of any refused IPv4 address.

``allow_hosts`` entries are host names (matched case-insensitively against the URL's host),
addresses or networks (``"127.0.0.1"``, ``"10.1.0.0/16"``) matched against the resolved
address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import httpcore

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``resolve(host, port)``: the host's addresses as strings (the system's DNS by default)."""

METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """The guard refused a connection; ``str()`` is the readable reason."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the operating system's resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv6 one (mapped, NAT64, 6to4, Teredo), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def refusal(address: Address) -> str | None:
    """Why ``address`` is not public (None: it is)."""
    inner = embedded_ipv4(address)
    if inner is not None:
        why = refusal(inner)
        return None if why is None else f"{why} ({inner} inside it)"
    if address in METADATA:
        return "a cloud metadata address"
    for name, flag in _KINDS:
        if getattr(address, flag):
            return name
    return None if address.is_global else "not a public address"


_KINDS = (
    ("a loopback address", "is_loopback"),
    ("a link-local address", "is_link_local"),
    ("a multicast address", "is_multicast"),
    ("the unspecified address", "is_unspecified"),
    ("a private address", "is_private"),
    ("a reserved address", "is_reserved"),
)


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """Checks a host and its resolved addresses; see the module docstring."""

    allow_names: frozenset[str] = frozenset()
    allow_networks: tuple[Network, ...] = ()
    resolver: Resolver = system_resolver

    @classmethod
    def allowing(cls, hosts: Iterable[str], resolver: Resolver = system_resolver) -> AddressGuard:
        """A guard whose ``allow_hosts`` are ``hosts`` (names, addresses or networks)."""
        names, networks = set[str](), list[Network]()
        for entry in hosts:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks), resolver)

    async def address(self, host: str, port: int) -> str:
        """The address to connect to for ``host``: every answer checked; ``Refused``."""
        host = host.strip("[]")
        literal = _literal(host)
        answers = [host] if literal is not None else await self._resolve(host, port)
        if not answers:
            raise Refused(f"{host} has no address")
        for answer in answers:
            self._check(host, ipaddress.ip_address(answer))
        return answers[0]

    async def _resolve(self, host: str, port: int) -> list[str]:
        try:
            return await self.resolver(host, port)
        except OSError as error:
            raise Refused(f"{host} could not be resolved: {error}") from None

    def _check(self, host: str, address: Address) -> None:
        if host.lower().rstrip(".") in self.allow_names:
            return
        if any(address in network for network in self.allow_networks):
            return
        why = refusal(address)
        if why is not None:
            shown = host if _literal(host) == address else f"{host} ({address})"
            raise Refused(
                f"refused to connect to {shown}: {why}; add it to [web_tools] allow_hosts "
                "to allow it"
            )


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses ``guard`` allows, to
    the very address it checked. A host is resolved once for the backend's life (one
    fetch): its later connections go to the same checked address."""

    def __init__(self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None):
        self._guard = guard
        self._inner = inner or httpcore.AnyIOBackend()
        self._pinned: dict[tuple[str, int], str] = {}

    async def _address(self, host: str, port: int) -> str:
        found = self._pinned.get((host, port))
        if found is None:
            found = self._pinned[host, port] = await self._guard.address(host, port)
        return found

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with asyncio.timeout(timeout):
            address = await self._address(host, port)
        return await self._inner.connect_tcp(
            address, port, timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise Refused("unix sockets are not fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
