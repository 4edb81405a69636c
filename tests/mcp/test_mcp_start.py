"""A name clash between MCP tools refuses the gateway's start with one readable line (the
real ``gateway.app.Gateway`` start, a real SDK server over HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app import Gateway, StartupError
from gateway.config import load_config
from tests.mcp.rig import serving
from tests.mcp.server import Seen
from tests.support.postgres import free_port


async def test_two_tools_with_one_registry_name_refuse_the_start_in_one_line(
    tmp_path: Path,
) -> None:
    async with serving(Seen()) as url:
        (tmp_path / "config.toml").write_text(
            f'[mcp.servers.odd]\nurl = "{url}"\ntools = ["x__echo"]\n'
            f'[mcp.servers.odd__x]\nurl = "{url}"\ntools = ["echo"]\n'
        )
        env = {"COMMONOS_HOME": str(tmp_path), "COMMONOS_WEB_LISTEN": f"127.0.0.1:{free_port()}"}
        gateway = Gateway(load_config(env=env))
        with pytest.raises(StartupError) as refused:
            await gateway.start()
    assert str(refused.value) == (
        "MCP tool name mcp__odd__x__echo is taken twice: by tool 'x__echo' of MCP server odd "
        "and tool 'echo' of MCP server odd__x"
    )
    assert not gateway.ready.is_set()
