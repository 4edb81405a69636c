"""Buttons as keys to type: a terminal has no buttons, so each gets a short answer.

An approval card's buttons (payloads ``ap:<id>:a``, ``ap:<id>:d``, ``ap:<id>:s``: approve,
deny, always for this session) are answered ``y``, ``n`` and ``a``; any other button
(a ``clarify`` choice ``ch:<id>:<n>``, ...) by its 1-based number among the message's
buttons. A turn's Stop button (``st:<id>``) is not offered: Ctrl-C is the terminal's Stop.
The payload is handed back unchanged, as a platform's button press would.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import Button, ButtonRows

APPROVAL_KEYS = {"a": "y", "d": "n", "s": "a"}
"""The last field of an approval payload → the key that answers it."""
STOP_KIND = "st"


@dataclass(frozen=True, slots=True)
class Answer:
    key: str
    button: Button


def answers_for(rows: ButtonRows) -> tuple[Answer, ...]:
    """Each button of ``rows`` with the key that presses it (keys are unique)."""
    buttons = [button for row in rows for button in row if not _stop(button.data)]
    answers: list[Answer] = []
    for number, button in enumerate(buttons, start=1):
        key = _approval_key(button.data) or str(number)
        if any(answer.key == key for answer in answers):
            key = str(number)
        answers.append(Answer(key, button))
    return tuple(answers)


def prompt_line(answers: tuple[Answer, ...]) -> str:
    """``"  y) ✅ Approve   n) ❌ Deny   a) ✅ Always (this session)"``."""
    return "  " + "   ".join(f"{a.key}) {a.button.label}" for a in answers)


def pressed(answers: tuple[Answer, ...], typed: str) -> Button | None:
    """The button ``typed`` answers (case and spaces ignored), if any."""
    wanted = typed.strip().lower()
    return next((a.button for a in answers if a.key == wanted), None)


def _approval_key(data: str) -> str | None:
    kind, _, rest = data.partition(":")
    action = rest.rpartition(":")[2]
    return APPROVAL_KEYS.get(action) if kind == "ap" else None


def _stop(data: str) -> bool:
    return data.partition(":")[0] == STOP_KIND
