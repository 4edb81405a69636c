"""The terminal's keys for buttons come from their roles, never from their payloads."""

from __future__ import annotations

from adapters.base import Button
from adapters.terminal.answers import answers_for, pressed, prompt_line


def test_approval_roles_are_answered_y_n_a_whatever_the_payload() -> None:
    card = [
        [Button("Approve", "xyz", role="approve"), Button("Deny", "abc", role="deny")],
        [Button("Always", "q", role="always")],
    ]
    answers = answers_for(card)
    assert [(a.key, a.button.data) for a in answers] == [("y", "xyz"), ("n", "abc"), ("a", "q")]
    assert prompt_line(answers) == "  y) Approve   n) Deny   a) Always"
    assert pressed(answers, " N ") == Button("Deny", "abc", role="deny")


def test_a_stop_role_is_not_offered_and_choices_are_numbered() -> None:
    rows = [[Button("Stop", "xyz", role="stop")], [Button("red", "r"), Button("blue", "b")]]
    assert [(a.key, a.button.data) for a in answers_for(rows)] == [("1", "r"), ("2", "b")]


def test_an_approval_shaped_payload_without_a_role_is_a_numbered_choice() -> None:
    rows = [[Button("one", "ap:1:a"), Button("two", "ap:1:d"), Button("three", "st:1")]]
    assert [a.key for a in answers_for(rows)] == ["1", "2", "3"]
