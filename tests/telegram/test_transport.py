"""The aiohttp Bot API transport under the real python-telegram-bot, against the simulator:
calls arrive form-encoded, and foreign errors leave as PTB's (a timeout is ``TimedOut``,
a refused connection ``NetworkError``)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable

import pytest
from telegram import Bot
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter
from yarl import URL

from adapters.telegram.transport import AiohttpRequest
from tests.platform_sim.telegram_sim import ALICE, TelegramSim

BotFactory = Callable[..., Bot]


@pytest.fixture
async def make_bot() -> AsyncIterator[BotFactory]:
    bots: list[Bot] = []

    def make(base_url: str, token: str, request: AiohttpRequest) -> Bot:
        bot = Bot(token, base_url=base_url, request=request, get_updates_request=request)
        bots.append(bot)
        return bot

    yield make
    for bot in bots:
        await bot.shutdown()


async def test_a_message_sent_through_the_transport_arrives_once(
    telegram_sim: TelegramSim, make_bot: BotFactory
) -> None:
    telegram_sim.chat(ALICE.id)
    bot = make_bot(f"{telegram_sim.url}/bot", telegram_sim.token, AiohttpRequest())
    await bot.initialize()
    sent = await bot.send_message(ALICE.id, "<b>héllo</b> & 👋", parse_mode="HTML")
    shown = telegram_sim.bot_messages(ALICE.id)
    assert [m.text for m in shown] == ["héllo & 👋"]
    assert str(sent.message_id) == shown[0].id
    assert len(telegram_sim.calls_to("sendMessage")) == 1


async def test_a_read_past_its_timeout_is_timed_out(telegram_sim: TelegramSim) -> None:
    request = AiohttpRequest()
    await request.initialize()
    poll = RequestData([RequestParameter.from_input("timeout", 1)])
    url = f"{telegram_sim.url}/bot{telegram_sim.token}/getUpdates"
    try:
        with pytest.raises(TimedOut):  # the long poll holds its answer for 1 s
            await request.do_request(url, "POST", poll, read_timeout=0.1)
    finally:
        await request.shutdown()


async def test_a_refused_connection_is_a_network_error(make_bot: BotFactory) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    bot = make_bot(f"http://127.0.0.1:{port}/bot", "1:x", AiohttpRequest())
    with pytest.raises(NetworkError) as raised:
        await bot.initialize()
    assert "aiohttp" in str(raised.value)
    assert not isinstance(raised.value, TimedOut)


async def test_calls_before_initialize_are_refused_readably() -> None:
    with pytest.raises(RuntimeError, match="not initialized"):
        await AiohttpRequest().do_request("http://127.0.0.1:9/bot1:x/getMe", "POST")


def test_the_environment_proxy_is_used_unless_the_host_is_exempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "direct.example")
    request = AiohttpRequest()
    assert request._proxy_for("https://api.example/bot1:x/getMe") == (
        URL("http://proxy.example:3128"),
        None,
    )
    assert request._proxy_for("https://direct.example/bot1:x/getMe") == (None, None)
