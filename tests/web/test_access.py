"""Who may use the web server: loopback without login, or the token; no cross-site writes."""

from __future__ import annotations

import aiohttp

from tests.web.conftest import WebGatewayFactory
from tests.web.harness import new_id

TOKEN = "a-long-random-web-token"


async def test_without_the_token_every_request_is_401(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway(token=TOKEN)
    for path in ("/api/events?conversation=abcdef12", "/dashboard", "/healthz", "/metrics"):
        async with gateway.http.get(gateway.url + path) as response:
            assert response.status == 401, path
    body = {"conversation": new_id(), "id": new_id(), "text": "hello"}
    async with await gateway.post("/api/send", body) as response:
        assert response.status == 401
    wrong = {"Authorization": "Bearer not-the-token"}
    async with gateway.http.get(gateway.url + "/healthz", headers=wrong) as response:
        assert response.status == 401
    async with gateway.http.get(gateway.url + "/", headers={"Accept": "text/html"}) as response:
        assert response.status == 401
        assert 'name="token"' in await response.text()
    assert await gateway.service.store.unfinished_inbound("web") == []


async def test_the_login_form_sets_a_strict_http_only_cookie(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway(token=TOKEN)
    jar = aiohttp.CookieJar(unsafe=True)  # keeps cookies for IP hosts, as a browser does
    async with aiohttp.ClientSession(trust_env=False, cookie_jar=jar) as browser:
        form = {"token": "wrong"}
        async with browser.post(gateway.url + "/login", data=form) as response:
            assert response.status == 401
        async with browser.post(
            gateway.url + "/login", data={"token": TOKEN}, allow_redirects=False
        ) as response:
            assert response.status == 303
            cookie = response.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        async with browser.get(gateway.url + "/") as response:
            assert response.status == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with gateway.http.get(gateway.url + "/", headers=bearer) as response:
        assert response.status == 200


async def test_a_cross_origin_post_is_refused(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    body = {"conversation": new_id(), "id": new_id(), "text": "hello"}
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        async with await gateway.post("/api/send", body, headers=headers) as response:
            assert response.status == 403
            assert (await response.json())["error"] == "cross-origin request refused"
    assert await gateway.service.store.unfinished_inbound("web") == []
    same = {"Origin": gateway.url}
    async with await gateway.post("/api/send", body, headers=same) as response:
        assert response.status == 202


async def test_a_foreign_host_name_is_refused_on_loopback(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    async with gateway.http.get(gateway.url + "/", headers={"Host": "evil.example"}) as response:
        assert response.status == 403


async def test_every_answer_carries_a_strict_content_security_policy(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    for path in ("/", "/static/chat.js", "/api/nothing-here"):
        async with gateway.http.get(gateway.url + path) as response:
            assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
            assert response.headers["X-Content-Type-Options"] == "nosniff"
