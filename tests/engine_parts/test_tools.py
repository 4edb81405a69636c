"""The built-in tools, run for real: real shells, real files, real process groups."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.cancellation import CancellationToken, Cancelled
from core.tools.base import Choice, ToolContext, ToolRegistry
from core.tools.builtin import builtin_tools
from core.tools.clarify import clarify_tool
from core.tools.delegate import delegate_tool
from core.tools.files import read_file_tool, write_file_tool
from core.tools.terminal import terminal_tool

WAIT = 5.0


def context(
    workspace: Path, token: CancellationToken | None = None, **kwargs: object
) -> ToolContext:
    return ToolContext(
        session_key="test:dm:1",
        session_id="s1",
        turn_id="t1",
        call_id="c1",
        token=token or CancellationToken(),
        workspace=workspace,
        **kwargs,  # type: ignore[arg-type]
    )


async def read_pid_from_fifo(fifo: Path) -> int:
    """Block (in a thread) until the command writes its child's pid into ``fifo``."""
    text = await asyncio.wait_for(asyncio.to_thread(fifo.read_text), WAIT)
    return int(text.strip())


async def wait_until_gone(pid: int) -> None:
    """Wait, on a pidfd (readable once the process has exited), for ``pid`` to end."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(fd, gone.set)
    try:
        await asyncio.wait_for(gone.wait(), WAIT)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


# terminal ---------------------------------------------------------------------------
async def test_terminal_runs_the_command_in_the_workspace(tmp_path: Path):
    result = await terminal_tool().handler({"command": "pwd"}, context(tmp_path))
    assert result == type(result)(f"{tmp_path}\n[exit code 0]")


async def test_terminal_reports_a_nonzero_exit_as_an_error(tmp_path: Path):
    result = await terminal_tool().handler({"command": "echo oops >&2; exit 3"}, context(tmp_path))
    assert result.is_error
    assert result.text == "oops\n[exit code 3]"


async def test_terminal_caps_output_and_counts_what_it_dropped(tmp_path: Path):
    tool = terminal_tool(max_output=100)
    result = await tool.handler(
        {"command": "head -c 1000 /dev/zero | tr '\\0' x"}, context(tmp_path)
    )
    assert result.text.startswith("x" * 100 + "\n[truncated 900 bytes]")


async def test_terminal_timeout_kills_the_whole_process_group(tmp_path: Path):
    os.mkfifo(tmp_path / "pid.fifo")
    command = "sleep 30 & echo $! > pid.fifo; wait"
    running = asyncio.create_task(
        terminal_tool().handler({"command": command, "timeout": 0.5}, context(tmp_path))
    )
    pid = await read_pid_from_fifo(tmp_path / "pid.fifo")
    result = await asyncio.wait_for(running, WAIT)
    assert result.is_error and "[timed out after 0.5 s; killed]" in result.text
    await wait_until_gone(pid)


async def test_cancelling_the_token_kills_the_command_and_raises_cancelled(tmp_path: Path):
    os.mkfifo(tmp_path / "pid.fifo")
    token = CancellationToken()
    command = "sleep 30 & echo $! > pid.fifo; wait"
    running = asyncio.create_task(
        terminal_tool().handler({"command": command}, context(tmp_path, token))
    )
    pid = await read_pid_from_fifo(tmp_path / "pid.fifo")
    token.cancel("cancelled")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(running, WAIT)
    await wait_until_gone(pid)


async def test_terminal_hides_secret_environment_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GREETING", "hello")
    result = await terminal_tool().handler({"command": "env"}, context(tmp_path))
    assert "GREETING=hello" in result.text
    assert "123:abc" not in result.text and "sk-secret" not in result.text


async def test_terminal_without_a_command_is_an_error_result(tmp_path: Path):
    result = await terminal_tool().handler({"command": "  "}, context(tmp_path))
    assert result.is_error and "command" in result.text


async def test_terminal_in_a_missing_workspace_is_an_error_result(tmp_path: Path):
    result = await terminal_tool().handler({"command": "true"}, context(tmp_path / "gone"))
    assert result.is_error and "cannot start the command" in result.text


# files ------------------------------------------------------------------------------
async def test_write_then_read_round_trips_and_creates_directories(tmp_path: Path):
    ctx = context(tmp_path)
    written = await write_file_tool().handler({"path": "a/b/note.txt", "content": "hi ✓"}, ctx)
    assert written.text == "wrote 6 bytes to a/b/note.txt"
    assert (await read_file_tool().handler({"path": "a/b/note.txt"}, ctx)).text == "hi ✓"


async def test_write_can_append(tmp_path: Path):
    ctx = context(tmp_path)
    await write_file_tool().handler({"path": "log", "content": "one\n"}, ctx)
    await write_file_tool().handler({"path": "log", "content": "two\n", "append": True}, ctx)
    assert (tmp_path / "log").read_text() == "one\ntwo\n"


@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/tmp/outside.txt"])
async def test_paths_that_leave_the_workspace_are_refused(tmp_path: Path, path: str):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = context(workspace)
    written = await write_file_tool().handler({"path": path, "content": "x"}, ctx)
    read = await read_file_tool().handler({"path": path}, ctx)
    assert written.is_error and read.is_error
    assert written.text == f"path {path!r} escapes the workspace"
    assert not (tmp_path / "outside.txt").exists()


async def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    (workspace / "link").symlink_to(tmp_path)
    ctx = context(workspace)
    read = await read_file_tool().handler({"path": "link/secret.txt"}, ctx)
    written = await write_file_tool().handler({"path": "link/secret.txt", "content": "x"}, ctx)
    assert read.is_error and "escapes the workspace" in read.text
    assert written.is_error
    assert (tmp_path / "secret.txt").read_text() == "top secret"


async def test_an_unusable_path_is_one_clear_error(tmp_path: Path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    nul = await read_file_tool().handler({"path": "a\x00b"}, context(tmp_path))
    loop = await write_file_tool().handler({"path": "loop", "content": "x"}, context(tmp_path))
    assert nul.is_error and nul.text.startswith("path 'a\\x00b' cannot be resolved")
    assert loop.is_error and loop.text.startswith("path 'loop' cannot be resolved")


async def test_read_is_capped_with_a_truncation_note(tmp_path: Path):
    (tmp_path / "big.txt").write_text("y" * 5000)
    result = await read_file_tool(max_read=1000).handler({"path": "big.txt"}, context(tmp_path))
    assert result.text == "y" * 1000 + "\n[truncated 4000 bytes]"


async def test_write_over_the_limit_is_refused_whole(tmp_path: Path):
    tool = write_file_tool(max_write=10)
    result = await tool.handler({"path": "f", "content": "z" * 11}, context(tmp_path))
    assert result.is_error and "limit is 10" in result.text
    assert not (tmp_path / "f").exists()


async def test_reading_a_missing_file_is_an_error_result(tmp_path: Path):
    result = await read_file_tool().handler({"path": "nope.txt"}, context(tmp_path))
    assert result == type(result)("nope.txt is not a file", is_error=True)


# clarify and delegate ---------------------------------------------------------------
async def test_clarify_returns_the_option_the_user_chose(tmp_path: Path):
    asked: list[Choice] = []

    async def ask_choice(choice: Choice) -> str | None:
        asked.append(choice)
        return choice.choices[1]

    args = {"question": "Which colour?", "choices": ["red", "blue", "red"]}
    result = await clarify_tool().handler(args, context(tmp_path, ask_choice=ask_choice))
    assert result.text == "blue"
    assert asked == [Choice("Which colour?", ("red", "blue"))]


async def test_clarify_without_an_answer_says_so(tmp_path: Path):
    async def nobody_answers(choice: Choice) -> str | None:
        return None

    args = {"question": "Which?", "choices": ["a", "b"]}
    result = await clarify_tool().handler(args, context(tmp_path, ask_choice=nobody_answers))
    assert result.text == "No answer (timed_out)"


async def test_clarify_with_too_few_choices_is_an_error_result(tmp_path: Path):
    args = {"question": "Which?", "choices": ["only"]}
    result = await clarify_tool().handler(args, context(tmp_path))
    assert result.is_error and "2 to 10 distinct choices" in result.text


async def test_delegate_runs_the_child_on_a_token_that_stops_with_the_parent(tmp_path: Path):
    parent = CancellationToken()
    tokens: list[CancellationToken] = []

    async def run_child(task: str, token: CancellationToken) -> str:
        tokens.append(token)
        return f"done: {task}"

    ctx = context(tmp_path, parent, run_child=run_child)
    result = await delegate_tool().handler({"task": "sum 2+2"}, ctx)
    assert result.text == "done: sum 2+2"
    assert tokens[0] is not parent
    parent.cancel("cancelled")
    assert tokens[0].cancelled and tokens[0].reason == "cancelled"


def test_builtin_tools_declare_risk_and_interactivity():
    registry = ToolRegistry(builtin_tools())
    declared = {spec.name: (spec.risk, spec.interactive) for spec in registry.specs()}
    assert declared == {
        "clarify": ("safe", True),
        "delegate": ("moderate", False),
        "read_file": ("safe", False),
        "send_file": ("safe", False),
        "terminal": ("dangerous", False),
        "write_file": ("moderate", False),
    }
