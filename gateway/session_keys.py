"""Re-export of :mod:`adapters.session_keys`, where the session key rule lives.

The rule sits in ``adapters/`` because adapters may not import ``gateway/``; gateway code
may import either module.
"""

from __future__ import annotations

from adapters.session_keys import (
    GroupSessions,
    KeyStrategy,
    SessionKeyRule,
    key_rule,
    session_key,
)

__all__ = ["GroupSessions", "KeyStrategy", "SessionKeyRule", "key_rule", "session_key"]
