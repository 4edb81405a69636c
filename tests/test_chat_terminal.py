"""``commonos chat`` as a real process on a pseudo-terminal (the standard ``pty`` module).

The person types lines and Ctrl-C on the terminal; the terminal driver turns Ctrl-C into
SIGINT for the chat, exactly as over SSH. Every wait reads the terminal until the expected
text appears (with a timeout); nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import re
import struct
import sys
import termios
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import DownloadFailed
from adapters.calls import Delete, LiveText, Send, SendFile
from adapters.terminal import TerminalAdapter, TerminalSettings
from adapters.terminal.screen import Screen
from core.attachments import Attachment, OutgoingFile
from core.tools.sandbox import Workspaces
from gateway.outbound.messages import STOPPED
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.test_cli import clean_env

TIMEOUT = 30.0
USER = "tester"
BANNER = f"session terminal:dm:{USER}"


def _controlling_terminal() -> None:
    """In the child (a new session): make its stdin, the pty, its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """The person's side of the pty: what the chat printed, and the keys typed."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.screen = ""
        self._seen = 0
        self._changed = asyncio.Event()
        self.ended = False
        asyncio.get_running_loop().add_reader(master, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the chat closed its side
            data = b""
        if not data:
            self.ended = True
            asyncio.get_running_loop().remove_reader(self.master)
        self.screen += data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        self._changed.set()

    async def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until ``text`` is printed after what was expected last; returns the output
        up to and including it."""
        try:
            async with asyncio.timeout(timeout):
                while (at := self.screen.find(text, self._seen)) < 0:
                    if self.ended:
                        raise AssertionError(f"the chat ended before {text!r}:\n{self.screen}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {text!r} in {timeout}s:\n{self.screen}") from None
        shown, self._seen = self.screen[self._seen : at + len(text)], at + len(text)
        return shown

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")

    def close(self) -> None:
        if not self.ended:
            asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)


@contextlib.asynccontextmanager
async def chat_process(
    home: Path, config: Path | None = None
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Terminal]]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))  # rows, columns
    env = {**clean_env(home), "LOGNAME": USER, "USER": USER}
    options = ["--config", str(config)] if config is not None else []
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "chat", *options,
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=home,
            start_new_session=True, preexec_fn=_controlling_terminal,
        )  # fmt: skip
    finally:
        os.close(slave)
    terminal = Terminal(master)
    try:
        yield process, terminal
    finally:
        if process.returncode is None:
            process.kill()
        await asyncio.wait_for(process.wait(), TIMEOUT)
        terminal.close()


async def quit_with_ctrl_c_twice(process: asyncio.subprocess.Process, terminal: Terminal) -> None:
    terminal.ctrl_c()
    await terminal.expect("Ctrl-C again within")  # handled: the next one is a second one
    terminal.ctrl_c()
    assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0, terminal.screen


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path.resolve()


async def test_chat_answers_a_message_in_plain_text(home: Path) -> None:
    async with chat_process(home) as (process, terminal):
        await terminal.expect(BANNER)
        terminal.type("hello there")
        reply = await terminal.expect("for real answers.")  # the end of the answer
        assert "\x1b[" in reply  # the live text, written as the model wrote it, was replaced
        shown = rendered(terminal.screen)
        assert shown.count("[demo model] Hello! You said: “hello there”.") == 1, shown
        assert "`run: ls`" not in shown and "run: ls" in shown, "rendered as plain text"
        terminal.type("/exit")
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0, terminal.screen


async def test_a_dangerous_command_waits_for_y_then_runs(home: Path) -> None:
    workspaces = Workspaces(home / "workspaces" / "default")
    scratch = workspaces.path_for(f"terminal:dm:{USER}") / "scratch"
    scratch.mkdir(parents=True)
    async with chat_process(home) as (process, terminal):
        await terminal.expect(BANNER)
        terminal.type("run: rm -rf ./scratch")
        card = await terminal.expect("a) ✅ Always (this session)")
        assert "⚠️ Approval needed: terminal" in card and "y) ✅ Approve" in card
        assert "n) ❌ Deny" in card
        assert scratch.exists(), "nothing runs before the answer"
        terminal.type("y")
        await terminal.expect(f"✅ Approved by {USER}")
        await terminal.expect("[demo model] Here is what the tools returned")
        assert not scratch.exists()
        await quit_with_ctrl_c_twice(process, terminal)


async def test_ctrl_c_stops_a_slow_turn_and_twice_quits(
    home: Path, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(), reply_text("Yes, after the stop."))
    config = home / "chat.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nbase_url = "{model_server.url}"\n'
        'api_key = "test-key"\nmodel = "scripted-model"\n'
    )
    async with chat_process(home, config) as (process, terminal):
        await terminal.expect(BANNER)
        terminal.type("think very hard")
        (request,) = await model_server.wait_for_requests(1, timeout=TIMEOUT)
        terminal.ctrl_c()
        await terminal.expect(STOPPED)
        await asyncio.wait_for(request.closed.wait(), TIMEOUT)
        assert process.returncode is None, "one Ctrl-C does not quit"
        terminal.type("are you still there?")
        await terminal.expect("Yes, after the stop.")
        await quit_with_ctrl_c_twice(process, terminal)
    assert terminal.screen.count(STOPPED) == 1


async def test_a_clarify_choice_is_answered_by_its_number(home: Path) -> None:
    async with chat_process(home) as (process, terminal):
        await terminal.expect(BANNER)
        terminal.type("ask: Which colour? red|green|blue")
        card = await terminal.expect("3) blue")
        assert "❓ Which colour?" in card and "1) red" in card and "2) green" in card
        terminal.type("2")
        await terminal.expect(f"✅ {USER} chose: green")
        await terminal.expect("[demo model] Here is what the tools returned")
        await terminal.expect("clarify: green")
        await quit_with_ctrl_c_twice(process, terminal)


# /attach and files the agent sends: the adapter itself, in this process --------------------
def _terminal() -> tuple[TerminalAdapter, io.StringIO]:
    screen = io.StringIO()
    return TerminalAdapter(TerminalSettings(user=USER), output=screen), screen


async def test_attach_sends_the_file_as_an_offered_attachment_with_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my notes.txt").write_text("line one\nline two\n")
    monkeypatch.chdir(tmp_path)
    terminal, screen = _terminal()
    event = terminal.event_for('/attach "my notes.txt" what is in this file?')
    assert event is not None and (event.kind, event.text) == ("text", "what is in this file?")
    (attachment,) = event.attachments
    assert attachment == Attachment(
        "document", "my notes.txt", "text/plain", 18, source=str(tmp_path / "my notes.txt")
    )
    chunks = [chunk async for chunk in terminal.download(attachment)]
    assert b"".join(chunks) == b"line one\nline two\n"
    image = tmp_path / "shot.png"
    image.write_bytes(b"\x89PNG")
    event = terminal.event_for(f"/attach {image}")
    assert event is not None and event.text == ""
    assert [(a.kind, a.mime, a.size) for a in event.attachments] == [("image", "image/png", 4)]
    assert screen.getvalue() == ""


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("/attach", "/attach: which file? /attach PATH [text]"),
        ("/attach /no/such/file.txt hi", "/attach: /no/such/file.txt: No such file or directory"),
        ("/attach /tmp", "/attach: /tmp: not a regular file"),
        ('/attach "/tmp/x y', "/attach: the path's \" is not closed"),
    ],
)
def test_attach_of_a_path_that_cannot_be_read_says_so_in_one_line_and_sends_nothing(
    line: str, said: str
) -> None:
    terminal, screen = _terminal()
    assert terminal.event_for(line) is None
    assert screen.getvalue() == f"\n{said}\n"


async def test_a_file_gone_before_the_download_fails_in_words(tmp_path: Path) -> None:
    doomed = tmp_path / "doomed.log"
    doomed.write_text("soon gone")
    terminal, _ = _terminal()
    event = terminal.event_for(f"/attach {doomed}")
    assert event is not None
    doomed.unlink()
    with pytest.raises(DownloadFailed, match=r"doomed\.log: cannot be read"):
        _ = [chunk async for chunk in terminal.download(event.attachments[0])]


async def test_a_file_the_agent_sends_is_named_with_its_size_and_where_it_is(
    tmp_path: Path,
) -> None:
    terminal, screen = _terminal()
    saved = tmp_path / ".outbox" / "report.pdf"
    file = OutgoingFile("k1", str(saved), "report.pdf", "application/pdf", 12_600, "document")
    sent = await terminal.perform(SendFile(terminal.chat, file, "Here it is"))
    assert sent is not None
    assert screen.getvalue() == f"\nHere it is\n📎 report.pdf (12.3 KB) saved at {saved}\n"
    assert terminal.capabilities.upload_limit > 0


def test_help_lists_attach_beside_the_gateways_commands() -> None:
    terminal, screen = _terminal()
    event = terminal.event_for("/help")
    assert event is not None and event.command == "help", "the router still answers /help"
    assert "/attach PATH [text] — send a file with a message" in screen.getvalue()


async def test_attach_in_the_chat_puts_the_file_in_the_workspace_for_the_demo_model(
    home: Path,
) -> None:
    (home / "notes.txt").write_text("first line\nsecond line\n")
    workspace = Workspaces(home / "workspaces" / "default").path_for(f"terminal:dm:{USER}")
    async with chat_process(home) as (process, terminal):
        await terminal.expect(BANNER)
        terminal.type("/help")
        await terminal.expect("/attach PATH [text] — send a file with a message")
        terminal.type("/attach missing.txt what is in this file?")
        await terminal.expect("/attach: missing.txt: No such file or directory")
        terminal.type("/attach notes.txt what is in this file?")
        answer = await terminal.expect("second line")
        assert "notes.txt is 23 bytes (text/plain), saved at inbox/notes.txt" in answer
        assert "first line" in answer
        assert (workspace / "inbox" / "notes.txt").read_text() == "first line\nsecond line\n"
        terminal.type("/exit")
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0, terminal.screen


# the screen: live text, and messages erased -------------------------------------------------
class TtyOutput(io.StringIO):
    """What the chat writes to a terminal (``isatty``), as bytes on the wire."""

    def isatty(self) -> bool:
        return True


def rendered(raw: str) -> str:
    """What a terminal shows after ``raw``: text, ``\\n``, ``\\r``, ``ESC [ n A`` (up) and
    ``ESC [ J`` (clear to the end of the screen); lines never wrap (short texts)."""
    lines, row, col, at = [""], 0, 0, 0
    while at < len(raw):
        if escape := re.match(r"\x1b\[(\d*)([AJ])", raw[at:]):
            if escape[2] == "A":
                row = max(0, row - int(escape[1] or 1))
            else:
                lines[row] = lines[row][:col]
                del lines[row + 1 :]
            at += escape.end()
            continue
        char, at = raw[at], at + 1
        if char == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif char == "\r":
            col = 0
        else:
            line = lines[row].ljust(col)
            lines[row], col = line[:col] + char + line[col + 1 :], col + 1
    return "\n".join(lines)


def _tty_terminal() -> tuple[TerminalAdapter, TtyOutput]:
    screen = TtyOutput()
    return TerminalAdapter(TerminalSettings(user=USER), output=screen), screen


SLOW = "⏳ The model has not answered for 5 s; still waiting. Send /stop to give up."


async def test_live_text_shows_as_the_model_writes_and_the_answer_takes_its_place() -> None:
    terminal, screen = _tty_terminal()
    chat = terminal.chat
    await terminal.perform(LiveText(chat, "The answer ", "append"))
    assert rendered(screen.getvalue()) == "\nThe answer "
    await terminal.perform(LiveText(chat, "is forty ", "append"))
    assert rendered(screen.getvalue()) == "\nThe answer is forty "
    await terminal.perform(LiveText(chat, "The answer is 42 ", "replace"))
    assert rendered(screen.getvalue()) == "\nThe answer is 42 "
    await terminal.perform(LiveText(chat, "", "seal"))
    await terminal.perform(Send(chat, "The answer is 42, computed."))
    assert rendered(screen.getvalue()) == "\nThe answer is 42, computed.\n"  # shown once


async def test_the_slow_notice_is_erased_when_the_answer_comes() -> None:
    terminal, screen = _tty_terminal()
    chat = terminal.chat
    notice = await terminal.perform(Send(chat, SLOW))
    await terminal.perform(LiveText(chat, "Here it ", "append"))  # below the notice
    assert rendered(screen.getvalue()) == f"\n{SLOW}\n\nHere it "
    assert notice is not None
    await terminal.perform(Delete(notice))
    assert rendered(screen.getvalue()) == "\nHere it "
    await terminal.perform(LiveText(chat, "comes. ", "append"))
    await terminal.perform(LiveText(chat, "", "seal"))
    await terminal.perform(Send(chat, "Here it comes."))
    assert rendered(screen.getvalue()) == "\nHere it comes.\n"


async def test_a_notice_removed_after_the_reply_is_erased_and_the_reply_stays() -> None:
    terminal, screen = _tty_terminal()
    chat = terminal.chat
    notice = await terminal.perform(Send(chat, SLOW))
    await terminal.perform(Send(chat, "The reply."))
    assert notice is not None
    await terminal.perform(Delete(notice))
    assert rendered(screen.getvalue()) == "\nThe reply.\n"
    output = TtyOutput()
    typed = Screen(output, width=80)
    typed.print(SLOW, key="7")
    typed.typed()  # the person pressed Enter: what is above their line stays
    typed.remove("7")
    assert rendered(output.getvalue()) == f"\n{SLOW}\n"


async def test_without_a_terminal_no_live_text_is_written_and_nothing_erased() -> None:
    terminal, screen = _terminal()
    chat = terminal.chat
    await terminal.perform(LiveText(chat, "The answer ", "append"))
    notice = await terminal.perform(Send(chat, SLOW))
    assert notice is not None
    await terminal.perform(Delete(notice))
    await terminal.perform(LiveText(chat, "", "seal"))
    await terminal.perform(Send(chat, "The answer."))
    assert screen.getvalue() == f"\n{SLOW}\n\nThe answer.\n"
