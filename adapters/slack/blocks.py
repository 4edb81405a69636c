"""Block Kit for messages with buttons: the text as a ``section``, each button row as an
``actions`` block.

The button's payload travels as its ``value`` (up to 2,000 characters), so an approval
card's buttons carry the approval id; ``action_id`` only has to be unique within the
message. Styles follow the button's role, never its payload: approve → ``primary``, deny
and a progress message's Stop → ``danger``.
"""

from __future__ import annotations

from typing import Any

from adapters.base import Button, ButtonRole, ButtonRows

SECTION_LIMIT = 3000
LABEL_LIMIT = 75
BUTTON_VALUE_LIMIT = 2000
Block = dict[str, Any]


def message_blocks(text: str, rows: ButtonRows, *, markup: bool) -> list[Block]:
    """``text`` in a section, then the buttons; ``[]`` (which removes buttons on an edit)
    when there are none."""
    if not any(rows):
        return []
    body = text if len(text) <= SECTION_LIMIT else text[: SECTION_LIMIT - 1] + "…"
    kind = "mrkdwn" if markup else "plain_text"
    section: Block = {"type": "section", "text": {"type": kind, "text": body or " "}}
    actions = [
        {
            "type": "actions",
            "block_id": f"row{r}",
            "elements": [_button(b, r, c) for c, b in enumerate(row)],
        }
        for r, row in enumerate(rows)
        if row
    ]
    return [section, *actions]


def _button(button: Button, row: int, column: int) -> Block:
    label = (
        button.label if len(button.label) <= LABEL_LIMIT else button.label[: LABEL_LIMIT - 1] + "…"
    )
    element: Block = {
        "type": "button",
        "action_id": f"commonos-{row}-{column}",
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": button.data,
    }
    style = BUTTON_STYLES.get(button.role)
    if style is not None:
        element["style"] = style
    return element


BUTTON_STYLES: dict[ButtonRole, str] = {"approve": "primary", "deny": "danger", "stop": "danger"}
"""A button's Block Kit ``style`` by its role; the other roles keep Slack's default (one
``primary`` per card, as Slack's guidelines ask)."""
