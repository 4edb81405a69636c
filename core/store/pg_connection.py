"""Connecting to the PostgreSQL store, and what its errors mean (docs/cluster.md).

:func:`open_pool` opens an asyncpg pool on the store URL. :func:`translated` turns every
foreign error into ours, at this edge only:

* the server cannot be reached or used *right now* — connection refused, host unknown,
  the server gone mid-query or shutting down (or gone while a pooled connection idled),
  too many connections, out of disk or memory
  (SQLSTATE classes 08, 53, 57P) — is :class:`~core.store.base.StoreUnavailable`: what was
  given was fine, the same call should succeed once the server is back;
* anything else (bad credentials, a missing database, a constraint refused) is
  :class:`~core.store.base.StoreError`.

Every message names the store by its **masked** URL (:func:`mask_url`, the same masking as
``gateway.config.sections.mask_url``, which core cannot import) and is scrubbed of the
password even where a driver message might repeat it: the password is never in a log line
or an error.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from core.store.base import StoreError, StoreUnavailable

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the server when opening a connection."""

_UNAVAILABLE_STATES = ("08", "53", "57P")
"""SQLSTATE prefixes meaning "the server cannot serve now", not "bad request"."""
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
"""What the driver and the network raise. ``InternalClientError`` ("cannot switch to
state ...; another operation (2) is in progress") is what asyncpg raises on a pooled
connection the server ended while it was idle (a shutdown's FATAL left its protocol
consuming the error): the server went away, like a refused connection."""


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (kept identical to the gateway's)."""
    head, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    userinfo, at, host = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    return f"{head}://{user}{':***' if colon else ''}{at}{host}"


def url_password(url: str) -> str | None:
    """The password in ``scheme://user:password@host/...``, if any."""
    _head, sep, rest = url.partition("://")
    userinfo, at, _host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return None
    return userinfo.partition(":")[2] or None


def scrubbed(text: str, url: str) -> str:
    """``text`` with the URL's password (if any) replaced by ``***``."""
    password = url_password(url)
    return text.replace(password, "***") if password else text


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the server is unreachable or cannot serve right now."""
    if isinstance(exc, OSError | asyncio.TimeoutError | socket.gaierror):
        return True
    gone = asyncpg.exceptions.ConnectionDoesNotExistError | asyncpg.InternalClientError
    if isinstance(exc, gone):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        return state.startswith(_UNAVAILABLE_STATES)
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


@contextmanager
def translated(url: str, doing: str) -> Iterator[None]:
    """Turn a driver or network error into ``StoreUnavailable`` / ``StoreError`` naming
    the masked URL and what was being done."""
    try:
        yield
    except StoreError:
        raise
    except DRIVER_ERRORS as exc:
        kind = StoreUnavailable if unavailable(exc) else StoreError
        detail = scrubbed(str(exc) or type(exc).__name__, url)
        raise kind(f"{mask_url(url)}: cannot {doing}: {detail}") from None


async def open_pool(url: str, size: int) -> asyncpg.Pool:
    """A pool of up to ``size`` connections to ``url`` (one is opened now, so a wrong URL
    fails here, translated)."""
    try:
        with translated(url, "connect to the store"):
            pool: asyncpg.Pool = await asyncpg.create_pool(
                url, min_size=1, max_size=size, timeout=CONNECT_TIMEOUT, command_timeout=None
            )
    except ValueError as exc:  # the driver's reading of the URL (a port that is no number)
        detail = scrubbed(str(exc), url)
        raise StoreError(f"{mask_url(url)} is not a usable PostgreSQL URL: {detail}") from None
    return pool
