"""Failed web logins are throttled per client address, on an injected clock: 5 failures in
60 s lock the address out (429 + Retry-After) for a lockout that doubles each time; other
addresses still log in, a session cookie is never throttled, and a spread attack gets one
try per address while a right token from a fresh address still works. Real aiohttp server
through the wiring; clients connect from distinct loopback addresses (127.0.0.x)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest

from adapters.web.access import LoginThrottle
from tests.web.conftest import WebGatewayFactory
from tests.web.harness import Running

TOKEN = "a-long-random-web-token"


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Client = Callable[[str], Awaitable[aiohttp.ClientSession]]


@pytest.fixture
async def client_from() -> AsyncIterator[Client]:
    """``await client_from("127.0.0.7")``: a cookie-keeping session from that address."""
    sessions: list[aiohttp.ClientSession] = []

    async def make(address: str) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(local_addr=(address, 0))
        jar = aiohttp.CookieJar(unsafe=True)
        session = aiohttp.ClientSession(connector=connector, cookie_jar=jar, trust_env=False)
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        await session.close()


async def _throttled(web_gateway: WebGatewayFactory) -> tuple[Running, ManualClock]:
    gateway = await web_gateway(token=TOKEN)
    clock = ManualClock()
    gateway.adapter.gate.throttle = LoginThrottle(clock)
    return gateway, clock


async def _log_in(gateway: Running, http: aiohttp.ClientSession, token: str) -> tuple[int, str]:
    async with http.post(
        gateway.url + "/login", data={"token": token}, allow_redirects=False
    ) as response:
        return response.status, response.headers.get("Retry-After", "")


async def _fail(gateway: Running, http: aiohttp.ClientSession, times: int) -> None:
    for _ in range(times):
        assert await _log_in(gateway, http, "wrong") == (401, "")


async def test_five_failures_lock_the_address_out_even_for_the_right_token(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, clock = await _throttled(web_gateway)
    http = await client_from("127.0.0.2")
    await _fail(gateway, http, 5)
    async with http.post(gateway.url + "/login", data={"token": TOKEN}) as response:
        assert (response.status, response.headers["Retry-After"]) == (429, "60")
        assert "Too many failed logins; try again in 60 s." in await response.text()
    clock.now += 59
    assert await _log_in(gateway, http, TOKEN) == (429, "1")
    clock.now += 1
    assert await _log_in(gateway, http, TOKEN) == (303, "")


async def test_each_further_lockout_doubles_up_to_an_hour(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, clock = await _throttled(web_gateway)
    http = await client_from("127.0.0.2")
    waits = []
    for _ in range(8):
        await _fail(gateway, http, 5)
        status, retry_after = await _log_in(gateway, http, "wrong")
        assert status == 429
        waits.append(int(retry_after))
        clock.now += int(retry_after)
    assert waits == [60, 120, 240, 480, 960, 1920, 3600, 3600]


async def test_failures_spread_over_more_than_a_minute_do_not_lock_out(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, clock = await _throttled(web_gateway)
    http = await client_from("127.0.0.2")
    for _ in range(3):
        await _fail(gateway, http, 4)
        clock.now += 61
    assert await _log_in(gateway, http, TOKEN) == (303, "")


async def test_a_login_from_another_address_is_not_locked_out(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, _ = await _throttled(web_gateway)
    attacker, user = await client_from("127.0.0.2"), await client_from("127.0.0.3")
    await _fail(gateway, attacker, 5)
    assert (await _log_in(gateway, attacker, TOKEN))[0] == 429
    assert await _log_in(gateway, user, TOKEN) == (303, "")
    async with user.get(gateway.url + "/healthz") as response:
        assert response.status in (200, 503)


async def test_wrong_bearer_tokens_count_and_a_session_cookie_is_never_throttled(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, _ = await _throttled(web_gateway)
    browser, prober = await client_from("127.0.0.2"), await client_from("127.0.0.2")
    assert await _log_in(gateway, browser, TOKEN) == (303, "")
    for _ in range(5):
        wrong = {"Authorization": "Bearer wrong"}
        async with prober.get(gateway.url + "/healthz", headers=wrong) as response:
            assert response.status == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with prober.get(gateway.url + "/healthz", headers=bearer) as response:
        assert (response.status, response.headers["Retry-After"]) == (429, "60")
        assert (await response.json())["error"].startswith("too many failed logins")
    async with browser.get(gateway.url + "/") as response:  # the cookie from the login
        assert response.status == 200


async def test_a_spread_attack_gets_one_try_per_address_and_a_right_token_still_works(
    web_gateway: WebGatewayFactory, client_from: Client
) -> None:
    gateway, _ = await _throttled(web_gateway)
    for host in range(1, 51):  # 50 addresses, one failure each: the backstop is reached
        await _fail(gateway, await client_from(f"127.0.1.{host}"), 1)
    newcomer = await client_from("127.0.2.1")
    await _fail(gateway, newcomer, 1)
    assert (await _log_in(gateway, newcomer, "wrong"))[0] == 429
    assert await _log_in(gateway, await client_from("127.0.2.2"), TOKEN) == (303, "")
