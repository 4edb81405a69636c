"""Contract: the Telegram simulator's per-chat bursts (``FloodLimits(chat_bursts=...)``), as
Telegram behaves — a short burst, then about one message a second, then HTTP 429 with the
Bot API's own body and a whole-second ``retry_after`` — on a clock the test moves."""

from __future__ import annotations

from aiohttp import ClientSession

from tests.platform_sim.telegram_sim import ALICE, BOB, ChatBursts, FloodLimits, TelegramSim


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def send(
    session: ClientSession, sim: TelegramSim, chat: int
) -> tuple[int, dict[str, object]]:
    url = f"{sim.url}/bot{sim.token}/sendMessage"
    async with session.post(url, json={"chat_id": chat, "text": "hi"}) as response:
        return response.status, await response.json()


def bursting(sim: TelegramSim, burst: int) -> Clock:
    clock = Clock()
    sim.clock = clock
    sim.flood = FloodLimits(chat_bursts=ChatBursts(burst=burst, per_second=1.0))
    sim.chat(ALICE.id)
    sim.chat(BOB.id)
    return clock


async def test_a_burst_goes_then_429_with_the_bot_api_body(telegram_sim: TelegramSim) -> None:
    clock = bursting(telegram_sim, burst=3)
    async with ClientSession() as session:
        statuses = [(await send(session, telegram_sim, ALICE.id))[0] for _ in range(3)]
        clock.now += 0.4
        status, body = await send(session, telegram_sim, ALICE.id)
    assert statuses == [200, 200, 200]
    assert status == 429
    assert body == {
        "ok": False, "error_code": 429, "description": "Too Many Requests: retry after 1",
        "parameters": {"retry_after": 1},
    }  # fmt: skip


async def test_a_chat_refills_one_message_a_second_and_other_chats_are_apart(
    telegram_sim: TelegramSim,
) -> None:
    clock = bursting(telegram_sim, burst=2)
    async with ClientSession() as session:
        burst = [(await send(session, telegram_sim, ALICE.id))[0] for _ in range(3)]
        other = (await send(session, telegram_sim, BOB.id))[0]
        clock.now += 1.0
        refilled = [(await send(session, telegram_sim, ALICE.id))[0] for _ in range(2)]
    assert burst == [200, 200, 429]
    assert other == 200  # Bob's chat has its own burst
    assert refilled == [200, 429]  # one message a second after the burst


async def test_edits_do_not_take_from_a_chats_burst(telegram_sim: TelegramSim) -> None:
    bursting(telegram_sim, burst=1)
    async with ClientSession() as session:
        status, body = await send(session, telegram_sim, ALICE.id)
        assert status == 200
        message = body["result"]
        assert isinstance(message, dict)
        url = f"{telegram_sim.url}/bot{telegram_sim.token}/editMessageText"
        edit = {"chat_id": ALICE.id, "message_id": message["message_id"], "text": "edited"}
        async with session.post(url, json=edit) as response:
            assert response.status == 200
