"""What the user reads when a model call failed for good: the kind of failure, in words.

(``docs/turn-loop.md`` §4, "Failures".) Never ``kind: status``: each kind of
:class:`~core.model.errors.ModelError` has its sentence, with the HTTP status and the
server's own short reason where there is one (known secrets masked, cut to
:data:`REASON_LIMIT` characters), and what the user can do::

    server            The model server is unavailable right now (HTTP 503: Loading model). …
    bad_response 4xx  The model server refused the request, so the model could not answer
                      (HTTP 400: …).
    bad_response      The model server sent a reply that could not be read (…).
    auth              The model server refused the API key (HTTP 401: Invalid API Key). …
    rate_limited      The model server is limiting requests (HTTP 429: …). …
    context_too_long  This conversation is too long for the model (HTTP 400: …). …
    timeout           The model server did not answer in time. …
    network           The model server is unreachable at 127.0.0.1:8080. …
"""

from __future__ import annotations

import re

from core.model.classify import quote
from core.model.errors import ErrorClassification, ModelError
from core.redaction import redact

REASON_LIMIT = 160
_PREFIX = re.compile(r"^model server (?:returned HTTP \d+|reported an error): ")
_KEPT = "Nothing was lost"


def readable_failure(error: ModelError) -> str:
    """The reply of a turn whose model call finally failed (``docs/turn-loop.md`` §4)."""
    found = error.classification
    why = _why(found)
    kind = found.kind
    if kind == "server":
        return f"The model server is unavailable right now{why}. {_KEPT}; try again."
    if kind == "auth":
        return f"The model server refused the API key{why}. Check [model] api_key."
    if kind == "rate_limited":
        later = "; try again in a while" if found.retryable else ""
        return f"The model server is limiting requests{why}. {_KEPT}{later}."
    if kind == "context_too_long":
        return f"This conversation is too long for the model{why}. Send /new to start afresh."
    if kind == "timeout":
        return f"The model server did not answer in time. {_KEPT}; try again."
    if kind == "network":
        return _network(error)
    if found.status is not None:
        return f"The model server refused the request, so the model could not answer{why}. {_KEPT}."
    return f"The model server sent a reply that could not be read{why}. {_KEPT}; try again."


def compact_failure(error: ModelError) -> str:
    """What ``/compact`` says when its summary call failed: that nothing changed, and the
    failure in the same words as a turn's (a refusal is not "did not answer")."""
    return f"Nothing was compacted: the summary call failed. {readable_failure(error)}"


def _network(error: ModelError) -> str:
    if not error.classification.retryable:  # the address itself is wrong
        reason = _reason(error.classification)
        return f"The model server address is not usable ({reason}). Check [model] base_url."
    at = f" at {error.server}" if error.server else ""
    return f"The model server is unreachable{at}. {_KEPT}; try again."


def _why(found: ErrorClassification) -> str:
    """`` (HTTP 400: short reason)``, `` (short reason)`` or nothing."""
    reason = _reason(found)
    if found.status is not None:
        return f" (HTTP {found.status}: {reason})" if reason else f" (HTTP {found.status})"
    return f" ({reason})" if reason else ""


def _reason(found: ErrorClassification) -> str:
    """The server's own words from the classification's message, short (cut at a word's
    end, never inside one) and masked."""
    return quote(redact(_PREFIX.sub("", found.message).strip()), REASON_LIMIT - 1)
