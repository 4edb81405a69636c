"""Rendering a Markdown reply for a platform, and cutting it to the platform's limit.

``renderer_for(capabilities.markup)`` gives a :class:`Renderer`:

* ``render(markdown)`` → text in the platform's markup (built from markdown-it-py's
  syntax tree, never by regex substitution);
* ``chunk(text, limit, unit)`` → pieces that each fit ``limit`` counted in ``unit`` and
  each stand alone as valid markup (a code block cut in two is closed and reopened);
* ``plain(chunk)`` → the same chunk with the markup stripped: the fallback a sender uses
  when the platform rejects the markup.

Dialects: ``telegram_html`` (Telegram's HTML parse mode), ``discord_markdown`` (Markdown
passed through; Discord renders it), ``slack_mrkdwn`` (Slack's mrkdwn), ``plain`` (markup
stripped).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from adapters.base import LengthUnit, Markup
from gateway.render.chunk_html import chunk_html
from gateway.render.chunk_text import chunk_text
from gateway.render.markdown_tree import render_markdown
from gateway.render.plain import PlainText
from gateway.render.slack_mrkdwn import SlackMrkdwn
from gateway.render.telegram_html import TelegramHtml, html_to_plain
from gateway.render.units import measure

__all__ = ["Renderer", "measure", "render_plain", "render_telegram_html", "renderer_for"]


def render_telegram_html(markdown: str) -> str:
    return render_markdown(markdown, TelegramHtml())


def render_plain(markdown: str) -> str:
    return render_markdown(markdown, PlainText())


@dataclass(frozen=True, slots=True)
class Renderer:
    markup: Markup

    def render(self, markdown: str) -> str:
        if self.markup == "telegram_html":
            return render_telegram_html(markdown)
        if self.markup == "plain":
            return render_plain(markdown)
        if self.markup == "slack_mrkdwn":
            return render_markdown(markdown, SlackMrkdwn())
        return markdown.strip()

    def chunk(self, text: str, limit: int, unit: LengthUnit) -> list[str]:
        if self.markup == "telegram_html":
            return chunk_html(text, limit, unit)
        return chunk_text(text, limit, unit, fences=self.markup != "plain")

    def plain(self, chunk: str) -> str:
        if self.markup == "telegram_html":
            return html_to_plain(chunk)
        if self.markup == "plain":
            return chunk
        if self.markup == "slack_mrkdwn":
            return html.unescape(chunk)
        return render_plain(chunk)


def renderer_for(markup: Markup) -> Renderer:
    return Renderer(markup)
