"""slack-sdk exceptions, translated into the adapter error tree at the edge.

::

    HTTP 429 / "ratelimited" (Retry-After header)          -> RateLimited(retry_after)
    message_not_found, cant_update_message,
    cant_delete_message, thread_not_found                  -> MessageGone
    msg_too_long                                           -> TooLong
    invalid_blocks, invalid_blocks_format                  -> BadMarkup
    not_in_channel, channel_not_found, is_archived,
    restricted_action, missing_scope, not_authed,
    invalid_auth, account_inactive, user_not_found         -> Forbidden
    anything else (SlackApiError, SlackClientError)        -> AdapterError

Slack answers HTTP 200 ``{"ok": false, "error": ...}`` for most failures; the error code
is what is matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.base import (
    AdapterError,
    BadMarkup,
    Forbidden,
    MessageGone,
    RateLimited,
    TooLong,
)

DEFAULT_RETRY_AFTER = 1.0
_KINDS: dict[str, type[AdapterError]] = {
    "message_not_found": MessageGone,
    "cant_update_message": MessageGone,
    "cant_delete_message": MessageGone,
    "thread_not_found": MessageGone,
    "msg_too_long": TooLong,
    "invalid_blocks": BadMarkup,
    "invalid_blocks_format": BadMarkup,
    "not_in_channel": Forbidden,
    "channel_not_found": Forbidden,
    "is_archived": Forbidden,
    "restricted_action": Forbidden,
    "missing_scope": Forbidden,
    "not_authed": Forbidden,
    "invalid_auth": Forbidden,
    "account_inactive": Forbidden,
    "user_not_found": Forbidden,
}


def error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` string of a failed call (``""`` when the body had none)."""
    try:
        return str(exc.response.get("error") or "")
    except Exception:
        return ""


def retry_after(exc: SlackApiError) -> float:
    """Seconds Slack asked to wait (``Retry-After``), or a second when it did not say."""
    headers = getattr(exc.response, "headers", None) or {}
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER


def translate(exc: SlackClientError) -> AdapterError:
    """The adapter error for one slack-sdk exception."""
    if not isinstance(exc, SlackApiError):
        return AdapterError(f"{type(exc).__name__}: {exc}")
    code = error_code(exc)
    if exc.response.status_code == 429 or code == "ratelimited":
        return RateLimited(retry_after(exc), "slack: ratelimited")
    kind = _KINDS.get(code, AdapterError)
    return kind(f"slack: {code or exc.response.status_code}")


@contextmanager
def platform_errors() -> Iterator[None]:
    """Re-raise any slack-sdk error raised inside as its adapter error."""
    try:
        yield
    except SlackClientError as exc:
        raise translate(exc) from exc
