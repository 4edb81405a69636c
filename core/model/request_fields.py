"""Request fields from the configuration, added to every Chat Completions body.

``[model] max_tokens``, ``temperature``, ``top_p`` and the free ``extra_body`` table
(``docs/turn-loop.md`` §4, "Request fields") fill in top-level fields the request does not
set itself: they never replace ``model``, ``messages``, ``tools``, ``stream`` or
``stream_options``, nor a field the engine set for one call (the grace call's
``tool_choice``, ``ModelRequest.extra``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})
"""Fields only the gateway sets."""


def with_fields(body: dict[str, Any], fields: Mapping[str, object]) -> dict[str, Any]:
    """``body`` with each of ``fields`` it does not already have (reserved ones skipped)."""
    added = {k: v for k, v in fields.items() if k not in RESERVED and k not in body}
    return {**body, **added}
