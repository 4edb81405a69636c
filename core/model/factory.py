"""Choose the model client a configuration asks for.

``provider = "demo"`` gives the offline :class:`DemoModel` (no key, no network);
``provider = "openai"`` gives an :class:`OpenAIClient` for any OpenAI-compatible endpoint.
The client is returned bare, without retries: the engine retries each call itself
(``core.agent.model_call`` through :func:`core.model.retry.call_with_retry`) so its error
hooks run between attempts.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.model.base import ModelClient
from core.model.demo import DemoModel
from core.model.openai_client import OpenAIClient
from core.model.timeouts import Timeouts

PROVIDERS = ("demo", "openai")


class UnknownProvider(ValueError):
    """The configured provider is not one we know."""


def build_model_client(
    provider: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeouts: Timeouts | None = None,
    timeout: float | None = None,
    stream_usage: bool = True,
    request_fields: Mapping[str, object] | None = None,
) -> ModelClient:
    """A client for ``provider``; ``base_url`` and ``model`` are required for ``openai``.
    ``timeouts`` are the client's bounds (:mod:`core.model.timeouts`); ``timeout`` is the
    deprecated single value; ``request_fields`` go into every request body
    (``[model] max_tokens``, ``temperature``, ``top_p``, ``extra_body``)."""
    if provider == "demo":
        return DemoModel(model or "demo")
    if provider != "openai":
        known = ", ".join(PROVIDERS)
        raise UnknownProvider(f"unknown model provider {provider!r} (expected one of: {known})")
    if not base_url or not model:
        missing = "base_url" if not base_url else "model"
        raise ValueError(f"model provider 'openai' needs {missing}")
    return OpenAIClient(
        base_url=base_url,
        model=model,
        api_key=api_key,
        headers=headers,
        timeouts=timeouts,
        timeout=timeout,
        stream_usage=stream_usage,
        request_fields=request_fields,
    )
