"""The web chat as a registered platform: its ``[web]`` section and its adapter factory.

On by default (a config without ``[web]`` still gets it, on loopback); ``enabled = false``
turns it off. A non-loopback ``listen`` needs a ``token``: the chat would otherwise be open
to the network. ``listen`` may come from env ``COMMONOS_WEB_LISTEN`` (which wins).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Annotated, Any

from adapters.base import Adapter
from adapters.config import Listen, PlatformSection, secret_field
from adapters.config_reader import Check, ReadContext, invalid, show
from adapters.platforms import AdapterContext, Platform, RouteHost

LISTEN_ENV = "COMMONOS_WEB_LISTEN"
NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
SPOOL_DIR = "web-uploads"
"""Under the data dir: the web chat's uploads and sent files (``adapters/web/uploads.py``)."""


def _name(value: object) -> str:
    if not isinstance(value, str) or NAME.fullmatch(value) is None:
        raise invalid(f"expected 1-64 characters of A-Z a-z 0-9 _ . @ -, got {show(value)}")
    return value


class WebSection(PlatformSection):
    listen: Listen = "127.0.0.1:8765"
    token: str | None = secret_field("COMMONOS_WEB_TOKEN")
    """Required by every request when set; required for a non-loopback ``listen``."""
    name: Annotated[str, Check(_name)] = "local"
    """Who the person at the browser is: ``web:<name>`` for approvals and allowlists."""

    @classmethod
    def prepared(cls, data: dict[str, Any], context: ReadContext) -> dict[str, Any]:
        """``COMMONOS_WEB_LISTEN`` wins over the file's ``listen``."""
        env_listen = context.env.get(LISTEN_ENV)
        return {**data, "listen": env_listen} if env_listen else data

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.token is None and not _loopback(self.listen.rpartition(":")[0]):
            yield (
                "listen",
                (
                    f"{show(self.listen)} is not a loopback address: set [web] token (or the env "
                    "var COMMONOS_WEB_TOKEN) so that every request needs it"
                ),
            )

    def implicit_users(self) -> frozenset[str]:
        return frozenset({self.name})


def _loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def build(section: WebSection, context: AdapterContext) -> Adapter:
    from adapters.web.adapter import WebAdapter, WebSettings

    host, _, port = section.listen.rpartition(":")
    settings = WebSettings(
        host=host.strip("[]"), port=int(port), token=section.token, user=section.name
    )
    spool = context.data_dir / SPOOL_DIR if context.data_dir is not None else None
    return WebAdapter(
        context.store, settings, spool_dir=spool, max_upload_bytes=context.max_attachment_bytes
    )


def route_host(adapter: Adapter) -> RouteHost:
    """The web chat's server, where the gateway serves its dashboard and health routes."""
    from adapters.web.adapter import WebAdapter

    if not isinstance(adapter, WebAdapter):
        raise TypeError(f"not the web chat's adapter: {adapter!r}")
    web = adapter
    return RouteHost(web.add_routes, web.settings.user, web.closing, address=lambda: web.url)


PLATFORM = Platform("web", WebSection, build, on_by_default=True, route_host=route_host)
