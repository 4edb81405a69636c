"""Errors of the model port, as a small tree of classified values.

::

    ModelError                      (carries an ErrorClassification)
      kind = auth                   401/403, bad key          not retryable
      kind = rate_limited           429 (retry_after honoured) retryable
      kind = context_too_long       400 with a context-length error
      kind = server                 5xx                        retryable
      kind = timeout                connect/read timeout       retryable
      kind = network                connection refused/reset   retryable
      kind = bad_response           non-JSON, wrong shape, other 4xx

The classification is a value, so the ``transform_api_error_classification`` hook can
replace it (e.g. declare a provider-specific 400 retryable).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ErrorKind = Literal[
    "auth", "rate_limited", "context_too_long", "server", "timeout", "network", "bad_response"
]

RETRYABLE_KINDS: frozenset[ErrorKind] = frozenset({"rate_limited", "server", "timeout", "network"})


@dataclass(frozen=True, slots=True)
class ErrorClassification:
    kind: ErrorKind
    message: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    prompt_tokens: int | None = None
    """``context_too_long``: the request's size in the server's own tokens, when its error
    says (llama.cpp's ``n_prompt_tokens``, OpenAI's "your messages resulted in N tokens")."""

    @classmethod
    def of(
        cls,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        prompt_tokens: int | None = None,
    ) -> ErrorClassification:
        return cls(kind, message, kind in RETRYABLE_KINDS, status, retry_after, prompt_tokens)

    def with_retryable(self, retryable: bool) -> ErrorClassification:
        return replace(self, retryable=retryable)


class ModelError(Exception):
    """A failed model call; ``classification`` says what kind and whether to retry;
    ``server`` is the host it was sent to, when the client knows (for the user's text)."""

    def __init__(self, classification: ErrorClassification, *, server: str | None = None) -> None:
        super().__init__(f"{classification.kind}: {classification.message}")
        self.classification = classification
        self.server = server

    @property
    def kind(self) -> ErrorKind:
        return self.classification.kind
