"""Text for the browser: Markdown rendered on the server into HTML that is safe to insert.

markdown-it-py runs with ``html`` disabled, so any raw HTML in a model's reply
(``<script>``, ``<img onerror>``) comes out escaped, as text; its link validator refuses
``javascript:``/``vbscript:``/``data:`` URLs; every link opens in a new tab with
``rel="noopener noreferrer"``. Plain text (notices, progress, approval cards) is escaped
whole. The page additionally runs under ``Content-Security-Policy: default-src 'self'``,
so even a rendering mistake could not run inline script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

LINK_REL = "noopener noreferrer"


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    token.attrSet("rel", LINK_REL)
    token.attrSet("target", "_blank")
    return renderer.renderToken(tokens, idx, options, env)


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _markdown()


def markdown_html(markdown: str) -> str:
    """A Markdown reply as sanitised HTML (raw HTML escaped, links ``noopener``)."""
    html_text: str = _MD.render(markdown)
    return html_text


def plain_html(text: str) -> str:
    """Plain text as HTML: escaped; line breaks are kept by the page's ``pre-wrap``."""
    return html.escape(text)


def to_html(text: str, *, markup: bool) -> str:
    """What the adapter shows for ``text``: Markdown when ``markup``, plain otherwise."""
    return markdown_html(text) if markup else plain_html(text)
