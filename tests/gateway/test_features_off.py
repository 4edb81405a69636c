"""Metrics are kept only where they are served (issue 29 point 4, docs/architecture.md §10):
with the web chat on, the real wiring keeps them — its observing hooks are registered. With
no platform serving HTTP nothing of them is imported or registered:
tests/telegram/test_ready_imports.py checks that in a fresh interpreter at ready
(``gateway.web.metrics`` and ``prometheus_client`` absent), and the off case is also
asserted here for the hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.model.demo import DemoModel
from core.store.sqlite import open_store
from gateway.config import load_config
from gateway.wiring import build_service


@pytest.mark.parametrize("web", [False, True], ids=["web off", "web on"])
async def test_metrics_hooks_are_registered_only_when_a_platform_serves_them(
    tmp_path: Path, web: bool
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[telegram]\nenabled = true\ntoken = "1:x"\nallowed_users = [1]\n'
        f"[web]\nenabled = {str(web).lower()}\n",
        encoding="utf-8",
    )
    config = load_config(path, env={"COMMONOS_HOME": str(tmp_path)})
    store = await open_store(tmp_path / "commonos.db")
    try:
        service = build_service(config, store, DemoModel())
        hooks = service.agents["default"].hooks
        assert ("gateway.web.metrics" in hooks.sources("pre_llm_call")) is web
        assert ("gateway.web.metrics" in hooks.sources("on_session_end")) is web
    finally:
        await store.close()
