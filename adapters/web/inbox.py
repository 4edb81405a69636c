"""The web chat's messages in the shared durable inbox (:class:`adapters.inbox.DurableInbox`,
whose docstring draws the states): a sent message is stored first, then delivered, once.

A page names every message it sends with an id of its own choosing; the message is stored
in the store's inbound queue under ``(platform "web", "<conversation>/<id>")`` before it
is delivered. A retried POST with the same id (a flaky network, a double click, a reload
that resends) finds the id known and starts nothing: one message, one turn. The files a
message sends are stored with it as offered attachments (their upload ids in the spool,
:mod:`adapters.web.uploads`), so a replay offers them again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from adapters.base import EventSink, InboundEvent
from adapters.inbox import Activity, DurableInbox, ItemFormat
from core.attachments import ATTACHMENT_KINDS, Attachment, AttachmentKind
from core.store.base import InboundRecord, Store
from core.text import repair_fields

PLATFORM = "web"


@dataclass(frozen=True, slots=True)
class WebMessage:
    """One message typed in the page, as stored in the inbound queue."""

    conversation: str
    client_id: str
    text: str
    attachments: tuple[Attachment, ...] = ()

    def __post_init__(self) -> None:
        repair_fields(self)  # text made valid once, where it enters (core.text)

    @property
    def update_id(self) -> str:
        return f"{self.conversation}/{self.client_id}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_record(cls, record: InboundRecord) -> WebMessage:
        data = json.loads(record.payload)
        files = tuple(_attachment(item) for item in data.get("attachments", ()))
        return cls(str(data["conversation"]), str(data["client_id"]), str(data["text"]), files)


_KINDS: dict[str, AttachmentKind] = {kind: kind for kind in ATTACHMENT_KINDS}


def _attachment(item: dict[str, Any]) -> Attachment:
    kind = _KINDS.get(str(item.get("kind")), "document")
    return Attachment(
        kind, str(item["name"]), str(item["mime"]), int(item["size"]), str(item["source"])
    )


MESSAGES: ItemFormat[WebMessage] = ItemFormat(
    PLATFORM, "message", lambda m: m.update_id, WebMessage.to_json, WebMessage.from_record
)
EventOf = Callable[[WebMessage], InboundEvent]


class WebInbox(DurableInbox[WebMessage]):
    """The durable inbox of page messages; ``sink`` is also where presses go, unstored."""

    def __init__(
        self,
        store: Store,
        sink: EventSink,
        event_of: EventOf,
        *,
        activity: Activity[WebMessage] | None = None,
    ) -> None:
        self.sink, self.event_of = sink, event_of
        super().__init__(store, MESSAGES, self._handle, activity=activity)

    async def _handle(self, message: WebMessage) -> InboundEvent:
        event = self.event_of(message)
        await self.sink(event)
        return event
