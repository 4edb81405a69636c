"""Buttons as keys to type: a terminal has no buttons, so each gets a short answer.

The key follows the button's role, never its payload: an approval card's approve, deny and
always-for-this-session buttons are answered ``y``, ``n`` and ``a``; any other button (a
``clarify`` choice, ...) by its 1-based number among the message's buttons. A turn's Stop
button is not offered: Ctrl-C is the terminal's Stop. The payload is handed back
unchanged, as a platform's button press would.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import Button, ButtonRole, ButtonRows

ROLE_KEYS: dict[ButtonRole, str] = {"approve": "y", "deny": "n", "always": "a"}
"""A button's role → the key that answers it (other roles: the button's number)."""


@dataclass(frozen=True, slots=True)
class Answer:
    key: str
    button: Button


def answers_for(rows: ButtonRows) -> tuple[Answer, ...]:
    """Each button of ``rows`` with the key that presses it (keys are unique)."""
    buttons = [button for row in rows for button in row if button.role != "stop"]
    answers: list[Answer] = []
    for number, button in enumerate(buttons, start=1):
        key = ROLE_KEYS.get(button.role) or str(number)
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
