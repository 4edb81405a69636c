"""The model client's aiohttp transport: the environment's proxy is looked up once per
host and honoured unless the host is exempt, and not at all without ``trust_env``."""

from __future__ import annotations

import pytest
from yarl import URL

from core.model.http_transport import AiohttpTransport

PROXY = "http://proxy.example:3128"


def test_the_environment_proxy_is_used_unless_the_host_is_exempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    monkeypatch.setenv("NO_PROXY", "direct.example")
    transport = AiohttpTransport()
    assert transport._proxy_for(URL("https://api.example/v1")) == (URL(PROXY), None)
    assert transport._proxy_for(URL("https://direct.example/v1")) == (None, None)


def test_without_trust_env_no_proxy_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    transport = AiohttpTransport(trust_env=False)
    assert transport._proxy_for(URL("https://api.example/v1")) == (None, None)
