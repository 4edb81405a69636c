"""Slack's mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``; ``&<>`` escaped.

Model text never pings a channel: ``&``, ``<`` and ``>`` are escaped, so a ``<!channel>``,
``<!here>``, ``<!everyone>`` or ``<@U…>`` in a reply is shown, not acted on; the bare words
``@channel``/``@here``/``@everyone`` get a zero-width joiner so no client links them.
Tables (which mrkdwn cannot show) become aligned code blocks — the shared walk does that —
and a reply is chunked at line ends, a cut code block closed and reopened
(:func:`adapters.render.chunk_text.chunk_text`). Plain text (notices, cards) goes through
:func:`neutralise_plain`.
"""

from __future__ import annotations

import html
import re

from adapters.render.markdown import MarkdownRenderer

_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
WORD_JOINER = "\u2060"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _defuse(text: str) -> str:
    return _BROADCAST.sub(lambda m: f"@{WORD_JOINER}{m.group(1)}", text)


def neutralise_plain(text: str) -> str:
    """Plain text made inert for Slack: escaped, broadcast words defused."""
    return _defuse(_escape(text))


class SlackMrkdwn:
    def text(self, text: str) -> str:
        return _defuse(_escape(text))

    def bold(self, inner: str) -> str:
        return f"*{inner}*" if inner else ""

    def italic(self, inner: str) -> str:
        return f"_{inner}_" if inner else ""

    def strike(self, inner: str) -> str:
        return f"~{inner}~" if inner else ""

    def code(self, literal: str) -> str:
        return f"`{_escape(literal)}`" if literal else ""

    def pre(self, literal: str, language: str | None) -> str:
        return f"```\n{_escape(literal)}\n```"

    def link(self, href: str, inner: str) -> str:
        if not href or "|" in href or ">" in href or "<" in href:
            return inner
        if not href.startswith(("http://", "https://", "mailto:")):
            return inner
        return f"<{_amp(href)}|{inner}>" if inner else f"<{_amp(href)}>"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" for line in inner.split("\n"))


def _amp(href: str) -> str:
    return href.replace("&", "&amp;")


def _plain(chunk: str) -> str:
    return html.unescape(chunk).replace(WORD_JOINER, "")


def slack_renderer() -> MarkdownRenderer:
    """Markdown → mrkdwn, chunked at line ends (fences kept), entities undone as plain."""
    return MarkdownRenderer(SlackMrkdwn(), to_plain=_plain)
