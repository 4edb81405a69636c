"""Optional webhook mode: Telegram POSTs updates to an aiohttp endpoint we serve.

Telegram sends ``X-Telegram-Bot-Api-Secret-Token`` with every request when the webhook was
set with a ``secret_token``; anything without the right header is refused (403) and never
reaches the store. An update is answered 200 only after :meth:`Inbox.accept_raw` has
persisted it (one PTB cannot read is kept as a dead letter, so it never blocks the ones
behind it); Telegram redelivers whatever we failed to store (answered 500).
"""

from __future__ import annotations

import hmac
import json
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from telegram import Bot

from adapters.telegram.inbox import Inbox

_log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    secret_token: str
    public_url: str = ""
    """The https URL Telegram posts to (``setWebhook``); empty means the local address
    (``http://<listen>:<bound port><path>``), for a local Bot API server or a simulator."""
    listen: str = "127.0.0.1"
    port: int = 8443
    path: str = "/telegram/webhook"


class WebhookServer:
    """Serves the webhook endpoint; ``port`` is the bound port once started."""

    def __init__(self, bot: Bot, inbox: Inbox, settings: WebhookSettings) -> None:
        if not settings.secret_token:
            raise ValueError("telegram webhook: a secret_token is required (anyone could post)")
        self.bot = bot
        self.inbox = inbox
        self.settings = settings
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.settings.path, self.receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.settings.listen, self.settings.port).start()
        self.port = self._runner.addresses[0][1]

    @property
    def url(self) -> str:
        """Where Telegram should post: the public URL, or the bound local address."""
        if self.settings.public_url:
            return self.settings.public_url
        return f"http://{self.settings.listen}:{self.port}{self.settings.path}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, self.settings.secret_token.encode()):
            _log.warning("telegram webhook: request without the right secret token refused")
            return web.Response(status=403, text="forbidden")
        data = _json_object(await request.read())
        if data is None:
            return web.Response(status=400, text="not a Telegram update")
        try:
            await self.inbox.accept_raw(data)  # one PTB cannot read becomes a dead letter
        except Exception:
            _log.exception("telegram webhook: could not persist update %s", data.get("update_id"))
            return web.Response(status=500, text="try again")
        return web.Response(text="ok")


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError as exc:
        _log.warning("telegram webhook: body is not JSON (%s)", exc)
        return None
    return data if isinstance(data, dict) else None
