"""Telegram's HTML parse mode: the dialect, and the markup stripped back to plain text.

Only the tags Telegram accepts are produced (``b i s code pre a blockquote``), every
literal ``<``, ``>`` and ``&`` is escaped, and a code block's language travels as
``<pre><code class="language-x">``. Links whose target Telegram would refuse (relative,
``javascript:``) are shown as text.
"""

from __future__ import annotations

import html
import re

_LANGUAGE = re.compile(r"[\w+#.-]{1,32}")
_SAFE_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_TAG = re.compile(r"<[^>]*>")


class TelegramHtml:
    def text(self, text: str) -> str:
        return html.escape(text, quote=False)

    def bold(self, inner: str) -> str:
        return f"<b>{inner}</b>" if inner else ""

    def italic(self, inner: str) -> str:
        return f"<i>{inner}</i>" if inner else ""

    def strike(self, inner: str) -> str:
        return f"<s>{inner}</s>" if inner else ""

    def code(self, literal: str) -> str:
        return f"<code>{self.text(literal)}</code>" if literal else ""

    def pre(self, literal: str, language: str | None) -> str:
        body = self.text(literal) or " "
        if language and _LANGUAGE.fullmatch(language):
            return f'<pre><code class="language-{language}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def link(self, href: str, inner: str) -> str:
        if not href.lower().startswith(_SAFE_SCHEMES):
            return inner
        return f'<a href="{html.escape(href, quote=True)}">{inner}</a>'

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>" if inner else ""


def html_to_plain(markup: str) -> str:
    """The visible text of our Telegram HTML: tags dropped, entities decoded."""
    return html.unescape(_TAG.sub("", markup))
