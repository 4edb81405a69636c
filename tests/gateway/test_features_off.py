"""A feature that is off costs nothing (issue 29 point 4, docs/architecture.md §10): with no
platform serving HTTP (``[web] enabled = false``) the gateway keeps no metrics — no
``prometheus_client`` imported, no observing hooks, no counting stage in the bots'
pipelines (:mod:`gateway.web.metrics` is not even imported). Composed by the real
wiring in a fresh interpreter, so what another test imported cannot hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COMPOSE = """
import asyncio, json, sys
from pathlib import Path
from core.store.sqlite import open_store
from core.model.demo import DemoModel
from gateway.config import load_config
from gateway.wiring import build_service

async def main(home):
    config = load_config(Path(home) / "config.toml", env={"COMMONOS_HOME": home})
    store = await open_store(Path(home) / "commonos.db")
    service = build_service(config, store, DemoModel())
    hooks = service.agents["default"].hooks
    print(json.dumps({
        "prometheus": "prometheus_client" in sys.modules,
        "metrics": "gateway.web.metrics" in sys.modules,
        "observed": "gateway.web.metrics" in hooks.sources("pre_llm_call"),
    }))
    await store.close()

asyncio.run(main(sys.argv[1]))
"""


def composed(tmp_path: Path, web: bool) -> dict[str, object]:
    (tmp_path / "config.toml").write_text(
        '[telegram]\nenabled = true\ntoken = "1:x"\nallowed_users = [1]\n'
        f"[web]\nenabled = {str(web).lower()}\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-c", COMPOSE, str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("web", [False, True], ids=["web off", "web on"])
def test_metrics_are_kept_only_when_a_platform_serves_them(tmp_path: Path, web: bool) -> None:
    found = composed(tmp_path, web)
    assert found["prometheus"] is web
    assert found["metrics"] is web
    assert found["observed"] is web
