"""Slack's chat streams in :class:`SlackSim`: ``chat.startStream`` / ``appendStream`` /
``stopStream`` and the agent session's ``agent_session_stopped`` event.

A stream is always a reply in a thread (``thread_ts`` required); outside a DM it needs
``recipient_user_id`` and ``recipient_team_id`` (``missing_recipient_user_id`` /
``missing_recipient_team_id``). It is one bot message in the thread whose text is
everything appended (``markdown_text`` at most 12,000 characters a call, else
``msg_too_long``); ``chat.stopStream`` ends it (optional last ``markdown_text`` and up to
50 ``blocks``) and ``chat.update`` works on it afterwards (during the stream it answers
``cant_update_message``). Appending to or stopping a stream that ended is
``message_not_in_streaming_state``. The three methods count in the channel's write window
(:class:`~tests.platform_sim.slack_sim.RateLimit`).

Knobs on the sim: ``refuse_streams[channel] = code`` makes ``chat.startStream`` there fail
with ``code``; a user in ``connect_users`` (a Slack Connect user) makes ``chat.stopStream``
of a stream for them answer ``user_not_found`` (as seen in the field; the stream stays
live); ``channels[c]["is_member"] = False`` gives ``not_in_channel``. ``streams`` maps each
stream's ts to its :class:`SimStream`; ``await stop_agent_session(channel, thread_ts)`` is a
user pressing the native Stop button: Slack stops the thread's live streams itself and
delivers ``agent_session_stopped`` with their ts in ``streaming_message_ts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.platform_sim.base import Json
from tests.platform_sim.slack_sim import ALICE, APP, BOT_ID, BOT_USER, TEAM, SlackApiFailure

if TYPE_CHECKING:
    from tests.platform_sim.slack_sim import SlackSim, SlackUser

MAX_MARKDOWN = 12_000
MAX_STOP_BLOCKS = 50


@dataclass(slots=True)
class SimStream:
    """One chat stream: its message, who it is for, what was appended, whether it is live."""

    channel: str
    ts: str
    thread_ts: str
    recipient: str | None
    chunks: list[str] = field(default_factory=list)
    live: bool = True
    stopped_by: str = ""
    """``app`` (chat.stopStream) or ``user`` (the native Stop button)."""

    @property
    def text(self) -> str:
        return "".join(self.chunks)


async def chat_start_stream(sim: SlackSim, p: Json) -> Json:
    from tests.platform_sim.slack_api import _channel

    channel = _channel(sim, p)
    if not sim.channels[channel].get("is_member", True):
        raise SlackApiFailure("not_in_channel")
    thread = str(p.get("thread_ts") or "")
    if not thread:
        raise SlackApiFailure("invalid_arguments")
    if sim.find_message(channel, thread) is None:
        raise SlackApiFailure("thread_not_found")
    if code := sim.refuse_streams.get(channel):
        raise SlackApiFailure(code)
    recipient = _recipient(sim, channel, p)
    text = _markdown(p, required=False)
    sim.check_rate(channel)
    ts = sim.new_ts()
    raw: Json = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "app_id": APP,
                 "text": text, "ts": ts, "team": TEAM, "thread_ts": thread}  # fmt: skip
    sim.store(channel, raw)
    if sim.statuses.get((channel, thread)):  # the message clears the thread's status
        sim.statuses[(channel, thread)] = ""
    sim.streams[ts] = SimStream(channel, ts, thread, recipient, [text] if text else [])
    await sim.deliver_event(sim.event_of(channel, raw))
    return {"channel": channel, "ts": ts}


def _recipient(sim: SlackSim, channel: str, p: Json) -> str | None:
    user, team = p.get("recipient_user_id"), p.get("recipient_team_id")
    if not sim.channels[channel].get("is_im"):
        if not user:
            raise SlackApiFailure("missing_recipient_user_id")
        if not team:
            raise SlackApiFailure("missing_recipient_team_id")
    if user and str(user) not in sim.users:
        raise SlackApiFailure("user_not_found")
    return str(user) if user else None


def _markdown(p: Json, *, required: bool) -> str:
    text = str(p.get("markdown_text") or "")
    if required and not text:
        raise SlackApiFailure("no_text")
    if len(text) > MAX_MARKDOWN:
        raise SlackApiFailure("msg_too_long")
    return text


def _live(sim: SlackSim, p: Json) -> SimStream:
    from tests.platform_sim.slack_api import _channel, _message

    channel = _channel(sim, p)
    msg = _message(sim, channel, p.get("ts"))
    stream = sim.streams.get(msg.id)
    if stream is None or stream.channel != channel or not stream.live:
        raise SlackApiFailure("message_not_in_streaming_state")
    return stream


def _show(sim: SlackSim, stream: SimStream) -> None:
    msg = sim.find_message(stream.channel, stream.ts)
    assert msg is not None
    msg.raw["text"] = msg.text = stream.text


async def chat_append_stream(sim: SlackSim, p: Json) -> Json:
    stream = _live(sim, p)
    text = _markdown(p, required=True)
    sim.check_rate(stream.channel)
    stream.chunks.append(text)
    _show(sim, stream)
    return {"channel": stream.channel, "ts": stream.ts}


async def chat_stop_stream(sim: SlackSim, p: Json) -> Json:
    from tests.platform_sim.slack_api import block_errors

    stream = _live(sim, p)
    text = _markdown(p, required=False)
    blocks = p.get("blocks") or []
    if len(blocks) > MAX_STOP_BLOCKS or block_errors(blocks):
        raise SlackApiFailure("invalid_blocks")
    if stream.recipient in sim.connect_users:
        raise SlackApiFailure("user_not_found")
    sim.check_rate(stream.channel)
    if text:
        stream.chunks.append(text)
    _end(sim, stream, "app")
    msg = sim.find_message(stream.channel, stream.ts)
    assert msg is not None
    if blocks:
        msg.raw["blocks"] = blocks
    return {"channel": stream.channel, "ts": stream.ts, "message": msg.raw}


def _end(sim: SlackSim, stream: SimStream, by: str) -> None:
    stream.live, stream.stopped_by = False, by
    _show(sim, stream)


async def stop_agent_session(
    sim: SlackSim, channel: str, thread_ts: str, *, user: SlackUser = ALICE
) -> Json:
    """The user presses the native Stop button of the thread's agent session: Slack stops
    the thread's live streams and sends ``agent_session_stopped``; its event is returned."""
    live = [s for s in sim.streams.values() if s.live and (s.channel, s.thread_ts) == (
        channel, thread_ts)]  # fmt: skip
    for stream in live:
        _end(sim, stream, "user")
    event: Json = {"type": "agent_session_stopped", "channel": channel, "thread_ts": thread_ts,
                   "user": user.id, "streaming_message_ts": [s.ts for s in live],
                   "event_ts": sim.new_ts()}  # fmt: skip
    await sim.deliver_event(event)
    await sim.changed()
    return event


def streaming(sim: SlackSim, channel: str, ts: str) -> bool:
    """Is the message ``ts`` a stream still live (``chat.update`` refuses it then)?"""
    stream = sim.streams.get(ts)
    return stream is not None and stream.channel == channel and stream.live


METHODS = {
    "chat.startStream": chat_start_stream,
    "chat.appendStream": chat_append_stream,
    "chat.stopStream": chat_stop_stream,
}
