"""``commonos run`` with no config file serves the web chat (a real process, real HTTP)."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import sys
from pathlib import Path

import aiohttp

from tests.test_cli import READY, clean_env, finish, read_until, run_home

__all__ = ["run_home"]  # the fixture, shared with test_cli
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.web.harness import new_id

URL_LINE = re.compile(r"web chat: (http://127\.0\.0\.1:\d+/)")


async def start(home: Path, listen: str) -> asyncio.subprocess.Process:
    env = {**clean_env(home), "COMMONOS_WEB_LISTEN": listen}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run", env=env, cwd=home,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def reply_over_http(url: str) -> str:
    conversation = new_id()
    async with aiohttp.ClientSession(trust_env=False) as http:
        async with http.get(url) as page:
            assert page.status == 200
            assert "default-src 'self'" in page.headers["Content-Security-Policy"]
            assert '<script type="module" src="/static/chat.js">' in await page.text()
        events = await http.get(f"{url}api/events", params={"conversation": conversation})
        body = {"conversation": conversation, "id": new_id(), "text": "hello"}
        async with http.post(f"{url}api/send", json=body) as sent:
            assert sent.status == 202
        async with asyncio.timeout(20):
            async for line in events.content:
                if line.startswith(b"data: ") and b"demo model" in line and b'"bot"' in line:
                    events.close()
                    return line.decode()
    raise AssertionError("the stream ended without a reply")


async def test_run_with_no_config_serves_the_chat_and_answers(run_home: Path) -> None:
    process = await start(run_home, "127.0.0.1:0")
    try:
        log = "".join(await read_until(process, "web chat: http://"))
        match = URL_LINE.search(log)
        assert match is not None, log
        await read_until(process, READY)
        reply = await reply_over_http(match.group(1))
    finally:
        process.send_signal(signal.SIGTERM)
    code, rest = await finish(process)
    assert code == 0, rest
    assert "[demo model]" in reply


def hold_a_port() -> tuple[socket.socket, str]:
    """A listening socket on a free loopback port, and its ``host:port``."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken, f"127.0.0.1:{taken.getsockname()[1]}"


async def test_a_taken_port_with_no_other_platform_exits_1_with_one_line(run_home: Path) -> None:
    taken, where = hold_a_port()
    with taken:
        code, err = await finish(await start(run_home, where))
    assert code == 1
    assert err.splitlines()[-1] == (
        f"commonos: web: {where} is in use — set [web] listen (or COMMONOS_WEB_LISTEN) to a "
        "free address; no other platform is enabled, so nothing could reach the agent"
    )
    assert [line for line in err.splitlines() if where in line] == [err.splitlines()[-1]]
    assert "web adapter started" not in err and "ready" not in err and "Traceback" not in err


async def test_a_taken_port_with_telegram_warns_once_and_telegram_answers(
    run_home: Path, telegram_sim: TelegramSim
) -> None:
    (run_home / "config.toml").write_text(
        f"""
[telegram]
token = "{telegram_sim.token}"
base_url = "{telegram_sim.url}/bot"
base_file_url = "{telegram_sim.url}/file/bot"
allowed_users = [{ALICE.id}]
"""
    )
    taken, where = hold_a_port()
    with taken:
        process = await start(run_home, where)
        try:
            log = await read_until(process, READY)
            await telegram_sim.user_says(ALICE.id, "hello")
            reply = await telegram_sim.wait_for_bot_message(ALICE.id, timeout=20)
        finally:
            process.send_signal(signal.SIGTERM)
        code, rest = await finish(process)
    assert code == 0, rest
    assert "demo" in reply.text.lower()
    named = [line for line in log if where in line]
    assert len(named) == 1 and "WARNING" in named[0] and "is in use" in named[0], named
    assert "runs on with telegram" in named[0]
    assert any("telegram adapter started" in line for line in log)
    assert not any("web adapter started" in line for line in log)
    assert "Traceback" not in "".join(log) + rest
