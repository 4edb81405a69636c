"""One walk over markdown-it-py's syntax tree, emitting through a :class:`Dialect`.

Block layout: blocks are separated by a blank line; list items by a newline (a blank line
when the list is loose), each prefixed ``•`` or ``1.`` with continuation lines indented —
except the lines of a code block, which stay byte-identical;
headings become bold lines; tables become an aligned monospace block (platforms render
neither tables nor headings); a horizontal rule becomes a line of dashes. Raw HTML in the
Markdown is shown as text, never passed through.

A reply that is one line of words — a letter first, then only letters, digits, spaces and
``,.!?'":;()/#%@+=$-`` (:data:`PLAIN_LINE`) — is one paragraph of one text in any Markdown parse:
it is the dialect's text of it whole, without parsing (the same bytes as the walk,
``tests/test_render_fast_path.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from adapters.render.chunk_text import chunk_text
from adapters.render.dialect import Dialect
from adapters.render.plain import PlainText
from adapters.render.units import LengthUnit

RULE = "———"
_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
PLAIN_LINE = re.compile(r"[^\W\d_](?:[^\W_]|[ ,.!?'\":;()/#%@+=$-])*")
"""A line no Markdown construct can start or hold: no block marker first (a letter, not a
digit, ``#``, ``>``, ``-``, ``+``, ``|`` or a space), no inline marker (``*_~`[]<>&\\``),
no newline, no tab; ``_`` is the one word character left out (emphasis). ``#%@+=$`` mean
something only where a line starts, or nothing at all (no linkify, no math)."""


def render_markdown(markdown: str, dialect: Dialect) -> str:
    if PLAIN_LINE.fullmatch(markdown):
        return dialect.text(markdown.rstrip(" "))
    return walk_markdown(markdown, dialect)


def walk_markdown(markdown: str, dialect: Dialect) -> str:
    """``markdown`` in ``dialect`` by parsing it and walking the tree (every reply that is
    not a :data:`PLAIN_LINE`)."""
    root = SyntaxTreeNode(_PARSER.parse(markdown))
    keep = _unused_char(markdown)
    return _Walk(dialect, keep).blocks(root, "\n\n").strip().replace(keep, "\n")


def _unused_char(text: str) -> str:
    """A private-use character absent from ``text``: stands for a newline that must not be
    indented (inside a code block) until the walk is over."""
    return next(c for c in map(chr, range(0xE000, 0xF900)) if c not in text)


class _Walk:
    def __init__(self, dialect: Dialect, keep: str) -> None:
        self.d = dialect
        self.quote_depth = 0
        self.keep = keep
        """Newlines of code blocks travel as this character, so list indenting skips them."""

    def blocks(self, node: SyntaxTreeNode, separator: str) -> str:
        rendered = (self.block(child) for child in node.children)
        return separator.join(part for part in rendered if part)

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inline_of(node)
        if kind == "heading":
            return self.d.bold(self.inline_of(node))
        if kind in ("fence", "code_block"):
            language = node.info.split()[0] if node.info.strip() else None
            return self.d.pre(node.content.rstrip("\n"), language).replace("\n", self.keep)
        if kind in ("bullet_list", "ordered_list"):
            return self.listing(node)
        if kind == "blockquote":
            return self.blockquote(node)
        if kind == "table":
            return self.d.pre(_table_text(node), None).replace("\n", self.keep)
        if kind == "hr":
            return self.d.text(RULE)
        return self.d.text(node.content.rstrip("\n"))

    def listing(self, node: SyntaxTreeNode) -> str:
        start = int(str(node.attrs.get("start", 1)))
        loose = any(
            p.type == "paragraph" and not p.hidden for item in node.children for p in item.children
        )
        items = []
        for number, item in enumerate(node.children, start):
            marker = f"{number}. " if node.type == "ordered_list" else "• "
            body = self.blocks(item, "\n\n" if loose else "\n")
            items.append(self.d.text(marker) + _indent(body, " " * len(marker)))
        return ("\n\n" if loose else "\n").join(items)

    def blockquote(self, node: SyntaxTreeNode) -> str:
        self.quote_depth += 1
        try:
            inner = self.blocks(node, "\n\n")
        finally:
            self.quote_depth -= 1
        return inner if self.quote_depth else self.d.quote(inner)

    def inline_of(self, node: SyntaxTreeNode) -> str:
        return "".join(self.inline(child) for child in node.children)

    def inline(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "inline":
            return self.inline_of(node)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return self.d.code(node.content)
        if kind in _WRAPPERS:
            wrap: Callable[[str], str] = getattr(self.d, _WRAPPERS[kind])
            return wrap(self.inline_of(node))
        if kind in ("link", "image"):
            href = str(node.attrs.get("href") or node.attrs.get("src") or "")
            inner = self.inline_of(node) or self.d.text(str(node.attrs.get("alt", "")))
            return self.d.link(href, inner)
        return self.d.text(node.content)


def _indent(body: str, pad: str) -> str:
    first, *rest = body.split("\n")
    return "\n".join([first, *(pad + line if line else line for line in rest)])


_WRAPPERS = {"strong": "bold", "em": "italic", "s": "strike"}


def _table_text(node: SyntaxTreeNode) -> str:
    rows = [_row_cells(row) for section in node.children for row in section.children]
    if not rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _row_cells(row: SyntaxTreeNode) -> list[str]:
    return [_plain_inline(cell) for cell in row.children]


def _plain_inline(node: SyntaxTreeNode) -> str:
    if node.type in ("text", "code_inline", "html_inline"):
        return node.content
    return "".join(_plain_inline(child) for child in node.children)


@dataclass(frozen=True, slots=True)
class MarkdownRenderer:
    """A :class:`~adapters.render.Renderer` made of a dialect, the Markdown-aware text
    chunker and a plain-text fallback (``None``: the chunk is plain already)."""

    dialect: Dialect
    fences: bool = True
    to_plain: Callable[[str], str] | None = None

    def render(self, markdown: str) -> str:
        return render_markdown(markdown, self.dialect)

    def chunk(self, text: str, limit: int, unit: LengthUnit) -> list[str]:
        return chunk_text(text, limit, unit, fences=self.fences)

    def plain(self, chunk: str) -> str:
        return self.to_plain(chunk) if self.to_plain is not None else chunk


PLAIN = MarkdownRenderer(PlainText(), fences=False)
"""Plain text: the Markdown's words with the markup stripped."""


class CommonMarkRenderer:
    """Markdown passed through as is, for a platform that renders it itself; chunks keep
    code fences whole; the fallback is the plain words."""

    def render(self, markdown: str) -> str:
        return markdown.strip()

    def chunk(self, text: str, limit: int, unit: LengthUnit) -> list[str]:
        return chunk_text(text, limit, unit, fences=True)

    def plain(self, chunk: str) -> str:
        return render_plain(chunk)


def render_plain(markdown: str) -> str:
    return render_markdown(markdown, PlainText())
