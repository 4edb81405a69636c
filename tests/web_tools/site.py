"""A small web site on ``127.0.0.1:<free port>`` for the web tools' tests, and a scripted
resolver.

``LocalSite`` (aiohttp, in the test's event loop) serves a real-world page saved under
``tests/data/web/`` at ``/page``, an endless text stream at ``/endless``, redirects
(``/redirect`` → ``/page``, ``/away?to=URL`` → anywhere), a PDF at ``/file.pdf`` and a
``robots.txt`` set by the test (none: 404). Every request's path and ``Host`` header are
recorded in ``requests``.

``ScriptedResolver`` answers each look-up with the next scripted list of addresses (the
last one repeats) and records each name it was asked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

PAGE = Path(__file__).parent.parent / "data" / "web" / "rustdoc-what-is-rustdoc.html"
"""The rustdoc book's "What is rustdoc?" page, as the Rust 1.9x toolchain ships it."""


@dataclass
class Seen:
    path: str
    host: str


@dataclass
class ScriptedResolver:
    answers: list[list[str]]
    asked: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        index = min(len(self.asked), len(self.answers)) - 1
        return self.answers[index]


class LocalSite:
    def __init__(self) -> None:
        self.robots: str | None = None
        self.requests: list[Seen] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> LocalSite:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/page", self._page)
        app.router.add_get("/endless", self._endless)
        app.router.add_get("/redirect", self._redirect)
        app.router.add_get("/away", self._away)
        app.router.add_get("/file.pdf", self._pdf)
        app.router.add_get("/data.json", self._json)
        app.router.add_get("/robots.txt", self._robots)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    @web.middleware
    async def _record(self, request: web.Request, handler: web.Handler) -> web.StreamResponse:
        self.requests.append(Seen(request.path, request.headers.get("Host", "")))
        return await handler(request)

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(body=PAGE.read_bytes(), content_type="text/html", charset="utf-8")

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        line = b"all work and no play makes a long page\n" * 100
        while True:  # until the client goes away
            await response.write(line)
            await asyncio.sleep(0)

    async def _redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/page")

    async def _away(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def _pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.7\n", content_type="application/pdf")

    async def _json(self, request: web.Request) -> web.Response:
        return web.json_response({"answer": 42})

    async def _robots(self, request: web.Request) -> web.Response:
        if self.robots is None:
            raise web.HTTPNotFound()
        return web.Response(text=self.robots, content_type="text/plain")
