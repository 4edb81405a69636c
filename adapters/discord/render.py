"""Discord's markdown: the dialect, the chunker and the plain fallback.

Discord renders Markdown itself, so the dialect mostly re-emits it, escaping what would
otherwise turn literal text into markup (``\\ * _ ~ ` |``, and ``>``/``#``/``-`` at a
line start). Headings become bold lines and tables become code blocks (the shared walk
does both; Discord has no tables). Chunks are at most 2,000 characters by Discord's count
(code points), cut at line ends; a cut inside a code fence closes it and the next chunk
reopens it with the same language.
"""

from __future__ import annotations

import re

from adapters.render.markdown import MarkdownRenderer, render_plain

MAX_CONTENT = 2000
ZWSP = "\u200b"
_SPECIAL = re.compile(r"([\\*_~`|])")
_LINE_START = re.compile(r"(?m)^(\s*)([>#-])")
_LANGUAGE = re.compile(r"[\w+#.-]{1,32}")
_SAFE_SCHEMES = ("http://", "https://")


def escape(text: str) -> str:
    """Literal text, shown as typed (no markup, no masked link, no heading)."""
    escaped = _SPECIAL.sub(r"\\\1", text)
    return _LINE_START.sub(r"\1\\\2", escaped)


class DiscordMarkdown:
    def text(self, text: str) -> str:
        return escape(text)

    def bold(self, inner: str) -> str:
        return f"**{inner}**" if inner else ""

    def italic(self, inner: str) -> str:
        return f"*{inner}*" if inner else ""

    def strike(self, inner: str) -> str:
        return f"~~{inner}~~" if inner else ""

    def code(self, literal: str) -> str:
        if not literal:
            return ""
        if "`" in literal:
            safe = literal.replace("``", ZWSP.join("``"))
            return f"`` {safe} ``"
        return f"`{literal}`"

    def pre(self, literal: str, language: str | None) -> str:
        body = literal.replace("```", "``" + ZWSP + "`") or " "
        lang = language if language and _LANGUAGE.fullmatch(language) else ""
        return f"```{lang}\n{body}\n```"

    def link(self, href: str, inner: str) -> str:
        if not href.lower().startswith(_SAFE_SCHEMES) or ")" in href:
            return inner
        return f"[{inner}]({href})" if inner and inner != escape(href) else f"<{href}>"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" for line in inner.split("\n"))


def discord_renderer() -> MarkdownRenderer:
    """Markdown → Discord markdown, chunked at line ends with fences kept whole."""
    return MarkdownRenderer(DiscordMarkdown(), fences=True, to_plain=render_plain)
