"""Session keys and access rules, as values."""

from __future__ import annotations

import logging

import pytest

from adapters.base import SessionKey
from adapters.session_keys import KeyStrategy, session_key
from gateway.control.access import REPORTED_CAPACITY, AccessControl, AccessPolicy
from tests.gateway.fakes import Person, event

ALICE, BOB = Person("1", "Alice"), Person("2", "Bob")


def test_dm_key_is_per_chat() -> None:
    key = session_key("telegram", "dm", "42", user_id="1")
    assert str(key) == "telegram:dm:42"


def test_group_key_is_per_user_by_default_and_shared_when_configured() -> None:
    alice = session_key("telegram", "group", "-5", user_id="1")
    bob = session_key("telegram", "group", "-5", user_id="2")
    assert (str(alice), str(bob)) == ("telegram:group:-5:1", "telegram:group:-5:2")
    shared = KeyStrategy(group="shared")
    both = {str(session_key("telegram", "group", "-5", user_id=u, strategy=shared)) for u in "12"}
    assert both == {"telegram:group:-5"}


def test_thread_key_is_shared_by_its_members() -> None:
    keys = {str(session_key("telegram", "thread", "-5", user_id=u, thread_id="7")) for u in "12"}
    assert keys == {"telegram:thread:-5:7"}
    slack = session_key("slack", "channel", "C1", user_id="U1", thread_id="1700.1")
    assert str(slack) == "slack:thread:C1:1700.1"
    assert slack == SessionKey("slack", "thread", "C1", thread_id="1700.1")


def control(**policy: object) -> AccessControl:
    return AccessControl({"fake": AccessPolicy(**policy)})  # type: ignore[arg-type]


def test_default_is_deny_everyone() -> None:
    assert AccessControl({}).check(event(ALICE, "hi")) == "deny"


def test_listed_users_and_approvers_are_admitted() -> None:
    rules = control(allowed_users=frozenset({"1"}), approvers=frozenset({"2"}))
    assert rules.check(event(ALICE, "hi")) == "admit"
    assert rules.check(event(BOB, "hi")) == "admit"
    assert rules.check(event(Person("3", "Eve"), "hi")) == "deny"


def test_star_admits_everyone() -> None:
    assert control(allowed_users=frozenset({"*"})).check(event(Person("9", "Z"), "hi")) == "admit"


def test_unknown_user_is_logged_once_with_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    rules = control(allowed_users=frozenset({"1"}))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            rules.check(event(BOB, "hi"))
    assert [r.getMessage() for r in caplog.records] == [
        "fake user 2 (Bob) is not allowed; to allow them add '2' to [fake] allowed_users"
    ]


def test_group_text_needs_mention_or_reply_but_commands_do_not() -> None:
    rules = control(allowed_users=frozenset({"1"}))
    group = {"chat_type": "group", "chat_id": "-5"}
    assert rules.check(event(ALICE, "hello", **group)) == "ignore"  # type: ignore[arg-type]
    assert rules.check(event(ALICE, "hello", mentioned=True, **group)) == "admit"  # type: ignore[arg-type]
    assert rules.check(event(ALICE, "/stop", **group)) == "admit"  # type: ignore[arg-type]


def test_forum_topic_text_needs_a_mention_too_but_dms_never_do() -> None:
    rules = control(allowed_users=frozenset({"1"}))
    topic = {"chat_type": "thread", "chat_id": "-5", "thread_id": "7"}
    assert rules.check(event(ALICE, "hello", **topic)) == "ignore"  # type: ignore[arg-type]
    assert rules.check(event(ALICE, "hello", mentioned=True, **topic)) == "admit"  # type: ignore[arg-type]
    assert rules.check(event(ALICE, "hello")) == "admit"


def test_unknown_users_remembered_for_logging_are_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rules = control(allowed_users=frozenset({"1"}))
    strangers = [Person(str(n), f"S{n}") for n in range(1000, 1000 + REPORTED_CAPACITY + 1)]
    for stranger in strangers:
        rules.check(event(stranger, "hi"))
    assert len(rules._reported) == REPORTED_CAPACITY
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        rules.check(event(strangers[0], "hi"))  # forgotten first: logged again
        rules.check(event(strangers[-1], "hi"))  # still remembered
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["fake user 1000"]


def test_bots_are_ignored_unless_allowed() -> None:
    bot = Person("1", "OtherBot", is_bot=True)
    assert control(allowed_users=frozenset({"1"})).check(event(bot, "hi")) == "ignore"
    rules = control(allowed_users=frozenset({"1"}), allow_bots=True)
    assert rules.check(event(bot, "hi")) == "admit"
