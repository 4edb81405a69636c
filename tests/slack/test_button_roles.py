"""A button's Block Kit style on Slack comes from its role, never from its payload."""

from __future__ import annotations

import pytest

from adapters.base import Button, ButtonRole
from adapters.slack.blocks import message_blocks


def styles(*buttons: Button) -> dict[str, str | None]:
    blocks = message_blocks("card", [list(buttons)], markup=False)
    [actions] = [block for block in blocks if block["type"] == "actions"]
    return {element["value"]: element.get("style") for element in actions["elements"]}


@pytest.mark.parametrize(
    ("role", "style"),
    [("approve", "primary"), ("deny", "danger"), ("stop", "danger"), ("always", None),
     ("choice", None)],
)  # fmt: skip
def test_a_role_gives_its_style_whatever_the_payload(role: ButtonRole, style: str | None) -> None:
    assert styles(Button("x", "xyz", role=role)) == {"xyz": style}


def test_an_approval_shaped_payload_without_a_role_has_no_style() -> None:
    assert styles(Button("a", "ap:1:a"), Button("d", "ap:1:d"), Button("s", "st:1")) == {
        "ap:1:a": None,
        "ap:1:d": None,
        "st:1": None,
    }
