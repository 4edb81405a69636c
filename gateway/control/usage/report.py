"""What ``/usage``, ``commonos usage`` and the dashboard show of ``model_usage``."""

from __future__ import annotations

from collections.abc import Sequence

from core.store.usage import Totals


def figures(totals: Totals) -> str:
    """``12,345 tokens (10,000 in, 2,000 cached, 2,345 out), 0.0123 cost, 7 calls``."""
    tokens = (
        f"{totals.tokens:,} tokens ({totals.prompt_tokens:,} in, "
        f"{totals.cached_tokens:,} cached, {totals.completion_tokens:,} out)"
    )
    estimated = f", {totals.estimated} estimated" if totals.estimated else ""
    return f"{tokens}, cost {totals.cost:.4f}, {totals.calls} calls{estimated}"


def ranking(title: str, rows: Sequence[tuple[str, Totals]]) -> list[str]:
    if not rows:
        return []
    lines = [
        f"{n}. {name}: {t.tokens:,} tokens, cost {t.cost:.4f}"
        for n, (name, t) in enumerate(rows, 1)
    ]
    return [title, *lines]
