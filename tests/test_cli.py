"""The ``commonos`` command: ``--version``, ``check-config`` and ``run`` as a real process."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from gateway.app import Gateway, StartupError
from gateway.cli.main import main
from gateway.config import Config, load_config

READY_TIMEOUT = 30.0
READY = "gateway.app: ready: the gateway is running"
SECRET_ENV = (
    "COMMONOS_MODEL_API_KEY",
    "OPENAI_API_KEY",
    "COMMONOS_TELEGRAM_TOKEN",
    "COMMONOS_DISCORD_TOKEN",
    "COMMONOS_SLACK_BOT_TOKEN",
    "COMMONOS_SLACK_APP_TOKEN",
)


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV and "PROXY" not in k.upper()}
    return {**env, "COMMONOS_HOME": str(home)}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$COMMONOS_HOME``, with secret env vars removed for in-process runs."""
    for name in SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COMMONOS_HOME", str(tmp_path))
    return tmp_path


# --version and check-config (in process) ------------------------------------------
def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == "commonos 0.1.0"


def test_check_config_prints_effective_config_with_secrets_masked(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "123456789:AAH-very-secret-telegram-token"
    path = home / "custom.toml"
    path.write_text(f'[telegram]\ntoken = "{token}"\n[access]\ntelegram = [42]\n')
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert token not in out
    assert 'token = "12…en"' in out
    assert 'telegram = ["42"]' in out
    assert f"# effective configuration, loaded from {path}" in out


def test_check_config_without_path_uses_commonos_home(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text("[profiles.default]\nmax_iterations = 7\n")
    assert main(["check-config"]) == 0
    assert "max_iterations = 7" in capsys.readouterr().out


def test_check_config_prints_every_error_and_exits_1(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / "config.toml"
    path.write_text('[model]\nprovider = "openai"\ntimeout = 0\n')
    assert main(["check-config", "--config", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f'commonos: {path}: model.api_key: missing secret for provider = "openai": '
        "set api_key here or the env var COMMONOS_MODEL_API_KEY",
        f"commonos: {path}: model.timeout: expected a positive number, got 0",
        "commonos: config is invalid (2 error(s))",
    ]


# run (a real process) ---------------------------------------------------------------
@pytest.fixture
def run_home(tmp_path: Path) -> Path:
    """``$COMMONOS_HOME`` for a ``run`` process, as the gateway logs it (resolved)."""
    return tmp_path.resolve()


async def start_gateway(home: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        *args,
        env=clean_env(home),
        cwd=home,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_until(process: asyncio.subprocess.Process, needle: str) -> list[str]:
    """Log lines up to and including the first one containing ``needle``."""
    assert process.stderr is not None
    lines: list[str] = []

    async def scan() -> None:
        while not lines or needle not in lines[-1]:
            raw = await process.stderr.readline()  # type: ignore[union-attr]
            if not raw:
                raise AssertionError(f"exited before {needle!r}:\n{''.join(lines)}")
            lines.append(raw.decode())

    await asyncio.wait_for(scan(), READY_TIMEOUT)
    return lines


async def finish(process: asyncio.subprocess.Process) -> tuple[int, str]:
    _, err = await asyncio.wait_for(process.communicate(), READY_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, err.decode()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_run_reaches_ready_then_stops_cleanly_on_signal(
    run_home: Path, signum: signal.Signals
) -> None:
    process = await start_gateway(run_home)
    try:
        log = "".join(await read_until(process, READY))
    finally:
        process.send_signal(signum)
    code, rest = await finish(process)
    assert code == 0, rest
    assert "config: built-in defaults (no file)" in log
    assert f"data dir: {run_home}" in log
    assert f"database: {run_home / 'commonos.db'}" in log
    assert "using the offline demo provider — no API key configured" in log
    assert "web chat: http://127.0.0.1:8765/" in log or "[web] listen 127.0.0.1:8765" in log
    assert "store closed" in rest
    assert (run_home / "commonos.db").read_bytes().startswith(b"SQLite format 3\x00")


async def test_run_with_malformed_config_exits_1_with_one_readable_line(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("[gateway\n")
    code, err = await finish(await start_gateway(tmp_path, "--config", str(config)))
    assert code == 1
    assert err.splitlines() == [
        f"commonos: {config}: invalid TOML: Expected ']' at the end of a table declaration"
        " (at line 1, column 9)"
    ]


def resolved(path: Path) -> Path:
    return path.resolve()


async def test_run_with_a_workspace_that_cannot_be_created_exits_1_naming_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    config = tmp_path / "config.toml"
    config.write_text('[profiles.default]\nworkspace = "a-file/workspace"\n')
    code, err = await finish(await start_gateway(tmp_path, "--config", str(config)))
    assert code == 1
    workspace = resolved(tmp_path) / "a-file" / "workspace"
    assert err.splitlines()[-1] == (
        f"commonos: profile default: cannot create workspace {workspace}: Not a directory"
    )


async def test_run_refuses_a_database_that_is_not_sqlite_and_leaves_it_untouched(
    run_home: Path,
) -> None:
    database = run_home / "commonos.db"
    database.write_bytes(b"my precious notes\n")
    code, err = await finish(await start_gateway(run_home))
    assert code == 1
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"commonos: cannot open the store: {database} is not a SQLite database"
    )
    assert database.read_bytes() == b"my precious notes\n"


# the Gateway runtime (in process) ----------------------------------------------------
def soul_config(home: Path) -> Config:
    (home / "SOUL.md").write_text("You are terse.\n")
    (home / "config.toml").write_text('[profiles.default]\nsystem_prompt_file = "SOUL.md"\n')
    return load_config(env={"COMMONOS_HOME": str(home)})


async def test_gateway_start_and_stop_open_and_close_the_store(run_home: Path) -> None:
    gateway = Gateway(soul_config(run_home))
    await gateway.start()
    assert gateway.ready.is_set()
    assert gateway.model.model == "demo"
    assert await gateway.store.get_active_session("telegram:dm:1") is None
    assert (run_home / "commonos.db-wal").exists()  # open in WAL mode
    await gateway.stop()
    await gateway.stop()  # a second stop is harmless
    assert not gateway.ready.is_set()
    assert not (run_home / "commonos.db-wal").exists()  # the last connection closed


async def test_gateway_start_failure_closes_what_had_started(run_home: Path) -> None:
    gateway = Gateway(soul_config(run_home))
    (run_home / "SOUL.md").unlink()  # vanishes between config check and start
    with pytest.raises(StartupError, match=r"profile default: cannot read SOUL\.md"):
        await gateway.start()
    assert not gateway.ready.is_set()
    assert not (run_home / "commonos.db-wal").exists()
    with pytest.raises(RuntimeError, match="not started"):
        gateway.store  # noqa: B018


async def test_gateway_start_recovers_a_crashed_turn_once_as_a_restart(run_home: Path) -> None:
    from core.store.sqlite import open_store

    config = soul_config(run_home)
    store = await open_store(config.gateway.db_path)
    try:
        session = await store.create_session("telegram:dm:1", "default")
        await store.start_turn(session.id, "left-running")
    finally:
        await store.close()
    gateway = Gateway(config)
    await gateway.start()
    try:
        turn = await gateway.store.get_turn("left-running")
    finally:
        await gateway.stop()
    assert turn is not None and (turn.status, turn.error) == ("failed", "gateway restarted")


async def test_a_second_gateway_on_the_same_data_dir_is_refused_naming_the_first(
    run_home: Path,
) -> None:
    first = Gateway(soul_config(run_home))
    await first.start()
    try:
        second = Gateway(soul_config(run_home))
        with pytest.raises(StartupError, match=rf"another commonos process \(pid {os.getpid()}\)"):
            await second.start()
        assert await first.store.get_active_session("telegram:dm:1") is None  # first unharmed
    finally:
        await first.stop()
    again = Gateway(soul_config(run_home))  # the lock went with the first gateway
    await again.start()
    await again.stop()
