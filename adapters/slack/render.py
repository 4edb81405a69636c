"""Slack's mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``; ``&<>`` escaped."""

from __future__ import annotations

import html

from adapters.render.markdown import MarkdownRenderer


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackMrkdwn:
    def text(self, text: str) -> str:
        return _escape(text)

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
        if not href or "|" in href or ">" in href:
            return inner
        return f"<{href}|{inner}>" if inner else f"<{href}>"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" for line in inner.split("\n"))


def slack_renderer() -> MarkdownRenderer:
    """Markdown → mrkdwn, chunked at line ends (fences kept), entities undone as plain."""
    return MarkdownRenderer(SlackMrkdwn(), to_plain=html.unescape)
