"""Message drafts in the Telegram simulator: ``sendMessageDraft`` and the draft's Stop button.

``sendMessageDraft(chat_id, draft_id, text, message_thread_id, parse_mode/entities)`` streams
a partial message into a private chat (Bot API 9.3–10.0); Bot API 10.3 adds ``can_stop``
(the client shows a Stop button on the draft) and ``keep_on_stop`` (a stopped draft stays as
a real message). Each call is kept as a :class:`DraftVersion` of its :class:`SimDraft`, with
the time on ``sim.clock`` (the gateway's test clock in end-to-end tests)::

    sim.drafts.of(chat)               # [SimDraft] of the chat, first drawn first
    sim.drafts.live(chat, thread)     # the one the user sees now (None: none)
    draft.versions / draft.text / draft.can_stop / draft.state

How Telegram treats a draft, as modelled here:

* only private chats: a group, supergroup or channel answers 400
  ``Bad Request: TEXTDRAFT_PEER_INVALID`` (so does any chat after ``sim.refuse_drafts(chat)``);
  ``draft_id`` must be a non-zero integer; an empty text is the "Thinking…" placeholder
  (Bot API 10.0); 4096 UTF-16 units at most;
* a draft counts in the chat's flood limit like a message (``sim.flood``): over it, 429 with
  ``retry_after``;
* any real message from the bot in the same chat and thread dismisses the live draft
  (``state == "dismissed"``); a draft not refreshed for :data:`DRAFT_LIFETIME` seconds on
  ``sim.clock`` is no longer shown (:meth:`SimDraft.visible`);
* ``await sim.press_stop(chat)`` is the user pressing the live draft's Stop button (only a
  draft sent with ``can_stop``): the draft stops (``"stopped"``, or ``"kept"`` as a real bot
  message with its text when sent with ``keep_on_stop``) and Telegram sends the update
  ``stopped_message_generation`` ``{chat, message_thread_id, draft_id}`` — delivered only
  when the bot asked for it in ``allowed_updates``, as Telegram does;
  ``await sim.stop_update(chat, draft_id)`` sends that update alone (a press that raced the
  draft's end). A draft sent again after it stopped stays stopped (counted in
  ``draft.after_stop``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from tests.platform_sim.base import Json
from tests.platform_sim.telegram_markup import MarkupError, parse, utf16_len
from tests.platform_sim.telegram_types import TgChat, TgUpdate, bad_request

if TYPE_CHECKING:
    from tests.platform_sim.telegram_sim import TelegramSim

DRAFT_LIFETIME = 30.0
"""Seconds a draft stays shown after its last update (Telegram: "a temporary 30-second
preview")."""
PEER_INVALID = "TEXTDRAFT_PEER_INVALID"
STOP_UPDATE = "stopped_message_generation"
MAX_TEXT = 4096
DraftState = Literal["live", "dismissed", "stopped", "kept"]


@dataclass(frozen=True, slots=True)
class DraftVersion:
    """One ``sendMessageDraft`` call's content, as the client was told to draw it."""

    text: str
    entities: tuple[Json, ...]
    can_stop: bool
    keep_on_stop: bool
    at: float


@dataclass(slots=True)
class SimDraft:
    """One draft (``draft_id``) in one chat and thread: its versions, oldest first."""

    chat_id: int
    thread: int | None
    draft_id: int
    versions: list[DraftVersion] = field(default_factory=list)
    state: DraftState = "live"
    after_stop: int = 0
    """``sendMessageDraft`` calls made for it after it stopped."""

    @property
    def latest(self) -> DraftVersion:
        return self.versions[-1]

    @property
    def text(self) -> str:
        return self.latest.text

    @property
    def can_stop(self) -> bool:
        return self.latest.can_stop

    def visible(self, now: float) -> bool:
        """Shown to the user at ``now``: live, and refreshed within :data:`DRAFT_LIFETIME`."""
        return self.state == "live" and now - self.latest.at < DRAFT_LIFETIME


class DraftBook:
    """Every draft the bot drew, per chat; which chats refuse them."""

    def __init__(self) -> None:
        self.drafts: list[SimDraft] = []
        self.refusing: set[int] = set()

    def of(self, chat_id: int) -> list[SimDraft]:
        return [d for d in self.drafts if d.chat_id == chat_id]

    def find(self, chat_id: int, thread: int | None, draft_id: int) -> SimDraft | None:
        return next(
            (
                d
                for d in self.drafts
                if (d.chat_id, d.thread, d.draft_id) == (chat_id, thread, draft_id)
            ),
            None,
        )

    def live(self, chat_id: int, thread: int | None = None) -> SimDraft | None:
        """The chat's (thread's) live draft, the newest one drawn."""
        live = [d for d in self.of(chat_id) if d.thread == thread and d.state == "live"]
        return live[-1] if live else None

    def dismiss(self, chat_id: int, thread: int | None) -> None:
        """A real message from the bot arrived in the chat (thread): its live drafts go."""
        for draft in self.of(chat_id):
            if draft.thread == thread and draft.state == "live":
                draft.state = "dismissed"


async def send_message_draft(sim: TelegramSim, p: Json) -> bool:
    """``sendMessageDraft``: validated as Telegram does, kept as a version of its draft."""
    from tests.platform_sim.telegram_api import known_chat  # the methods import this module

    chat = known_chat(sim, p)
    if chat.type != "private" or chat.id in sim.drafts.refusing:
        raise bad_request(PEER_INVALID)
    draft_id = p.get("draft_id")
    if not isinstance(draft_id, int) or isinstance(draft_id, bool) or draft_id == 0:
        raise bad_request("draft_id must be a non-zero integer")
    text, entities = _draft_text(p)
    thread = p.get("message_thread_id")
    thread = int(thread) if thread is not None else None
    sim.check_flood(chat.id)
    version = DraftVersion(
        text, tuple(entities), p.get("can_stop") is True, p.get("keep_on_stop") is True,
        sim.clock(),
    )  # fmt: skip
    draft = sim.drafts.find(chat.id, thread, draft_id)
    if draft is None:
        draft = SimDraft(chat.id, thread, draft_id)
        sim.drafts.drafts.append(draft)
    if draft.state in ("stopped", "kept"):
        draft.after_stop += 1
    elif draft.state == "dismissed":
        draft.state = "live"  # drawn again after a message: shown again
    draft.versions.append(version)
    return True


def _draft_text(p: Json) -> tuple[str, list[Json]]:
    try:
        text, entities = parse(str(p.get("text") or ""), p.get("parse_mode"))
    except MarkupError as exc:
        raise bad_request(f"can't parse entities: {exc}") from None
    if "entities" in p and not p.get("parse_mode"):
        entities = list(p["entities"])
    if utf16_len(text) > MAX_TEXT:
        raise bad_request("message is too long")
    return text, entities


async def press_stop(
    sim: TelegramSim, chat: TgChat, draft_id: int | None, thread: int | None
) -> TgUpdate:
    """The user presses Stop on the chat's live draft (see the module docstring)."""
    draft = (
        sim.drafts.live(chat.id, thread)
        if draft_id is None
        else sim.drafts.find(chat.id, thread, draft_id)
    )
    if draft is None or not draft.visible(sim.clock()):
        raise ValueError(f"chat {chat.id} shows no draft {draft_id or ''} to stop")
    if not draft.can_stop:
        raise ValueError(f"draft {draft.draft_id} has no Stop button (sent without can_stop)")
    draft.state = "kept" if draft.latest.keep_on_stop else "stopped"
    if draft.state == "kept":
        raw = sim.new_message(chat, sim.bot, draft.text, thread=thread)
        sim.store(chat.id, raw)
    return await stop_update(sim, chat, draft.draft_id, thread)


async def stop_update(
    sim: TelegramSim, chat: TgChat, draft_id: int, thread: int | None
) -> TgUpdate:
    """The ``stopped_message_generation`` update for ``draft_id``, whatever its state."""
    payload: Json = {"chat": chat.to_json(), "draft_id": draft_id}
    if thread is not None:
        payload["message_thread_id"] = thread
    return await sim.push_update(STOP_UPDATE, payload)
