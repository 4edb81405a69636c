"""``/metrics`` counters of model usage: by profile and model only — never by person or
chat (no personal data in metric labels)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from core.types import Usage


class UsageCounters:
    """``commonos_model_tokens_total{profile,model,kind}`` (kind: prompt, cached,
    completion), ``commonos_model_calls_total{profile,model,estimated}`` and
    ``commonos_model_cost_total{profile,model}``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.tokens = Counter(
            "commonos_model_tokens", "Model tokens used", ["profile", "model", "kind"],
            registry=registry,
        )  # fmt: skip
        self.calls = Counter(
            "commonos_model_calls", "Model calls recorded (estimated: the server gave no usage)",
            ["profile", "model", "estimated"], registry=registry,
        )  # fmt: skip
        self.cost = Counter(
            "commonos_model_cost", "Model cost, in the price table's currency",
            ["profile", "model"], registry=registry,
        )  # fmt: skip

    def count(self, profile: str, model: str, usage: Usage, cost: float | None) -> None:
        self.tokens.labels(profile, model, "prompt").inc(usage.prompt_tokens)
        self.tokens.labels(profile, model, "cached").inc(usage.cached_tokens)
        self.tokens.labels(profile, model, "completion").inc(usage.completion_tokens)
        self.calls.labels(profile, model, str(usage.estimated).lower()).inc()
        if cost:
            self.cost.labels(profile, model).inc(cost)
