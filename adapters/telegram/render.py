"""Telegram's HTML parse mode: the dialect, the chunker and the plain-text fallback.

Dialect: only the tags Telegram accepts are produced (``b i s code pre a blockquote``),
every literal ``<``, ``>`` and ``&`` is escaped, and a code block's language travels as
``<pre><code class="language-x">``. Links whose target Telegram would refuse (relative,
``javascript:``) are shown as text.

Chunker: split our HTML into messages that fit a length limit, keeping every chunk valid.
The limit counts visible text only (Telegram measures "after entities parsing"), in the
platform's unit. A tag or an entity (``&amp;``) is never cut. Where a cut falls inside
open tags — a code block, a bold run — the chunk closes them and the next chunk reopens
them with the same attributes, so ``<pre><code class="language-py">`` is carried over.
Cuts prefer a line break, then a space, in the second half of the chunk; otherwise the
text is cut hard at the limit. A text with no tag and no entity (no ``<``, no ``&``) that
fits the limit is its one chunk, stripped, without being taken apart (the same chunks).
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from typing import Literal

from adapters.render.markdown import render_markdown
from adapters.render.units import MOST_PER_CHARACTER, LengthUnit, measure

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


_ATOM = re.compile(r"<[^>]*>|&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);|[^<&]|[<&]", re.DOTALL)
_TAG_NAME = re.compile(r"</?\s*([a-zA-Z-]+)")

TagRole = Literal["open", "close", "none"]


@dataclass(frozen=True, slots=True)
class _Atom:
    text: str
    units: int
    role: TagRole = "none"
    name: str = ""


def chunk_html(markup: str, limit: int, unit: LengthUnit) -> list[str]:
    if limit <= 0:
        raise ValueError("limit must be positive")
    if "<" in markup or "&" in markup:
        return chunk_atoms(markup, limit, unit)
    if len(markup) * MOST_PER_CHARACTER[unit] <= limit or measure(markup, unit) <= limit:
        text = markup.strip()
        return [text] if text else []
    return chunk_atoms(markup, limit, unit)


def chunk_atoms(markup: str, limit: int, unit: LengthUnit) -> list[str]:
    """:func:`chunk_html` atom by atom (any markup; ``limit`` positive)."""
    atoms = _atoms(markup, unit)
    chunks: list[str] = []
    stack: list[_Atom] = []
    start = 0
    while start < len(atoms):
        end, closing = _fit(atoms, start, stack, limit)
        body = "".join(a.text for a in [*stack, *atoms[start:end]])
        chunk = body + "".join(f"</{a.name}>" for a in reversed(closing))
        if html.unescape(re.sub(r"<[^>]*>", "", chunk)).strip():
            chunks.append(chunk.strip())
        stack, start = closing, _skip_breaks(atoms, end, closing)
    return chunks


def _atoms(markup: str, unit: LengthUnit) -> list[_Atom]:
    atoms = []
    for match in _ATOM.finditer(markup):
        text = match.group(0)
        if text.startswith("<") and len(text) > 1:
            name = _TAG_NAME.match(text)
            role: TagRole = "close" if text.startswith("</") else "open"
            atoms.append(_Atom(text, 0, role, name.group(1).lower() if name else ""))
        else:
            atoms.append(_text_atom(text, unit))
    return atoms


@functools.lru_cache(maxsize=4096)
def _text_atom(text: str, unit: LengthUnit) -> _Atom:
    """One character or entity; cached, since a reply repeats few distinct ones."""
    return _Atom(text, measure(html.unescape(text), unit))


def _fit(atoms: list[_Atom], start: int, stack: list[_Atom], limit: int) -> tuple[int, list[_Atom]]:
    """The end of the chunk starting at ``start`` and the tags still open there."""
    open_tags, used, index = list(stack), 0, start
    line_cut: tuple[int, list[_Atom]] | None = None
    space_cut: tuple[int, list[_Atom]] | None = None
    while index < len(atoms):
        atom = atoms[index]
        if used + atom.units > limit:
            break
        if atom.text == "\n" and used * 2 >= limit:
            line_cut = (index, list(open_tags))
        elif atom.text == " " and used * 2 >= limit:
            space_cut = (index, list(open_tags))
        used += atom.units
        _apply(open_tags, atom)
        index += 1
    else:
        return index, open_tags
    if index == start:  # one atom wider than the limit: take it anyway, never loop forever
        _apply(open_tags, atoms[start])
        return start + 1, open_tags
    end, open_tags = line_cut or space_cut or (index, open_tags)
    return _absorb_closers(atoms, end, open_tags)


def _apply(open_tags: list[_Atom], atom: _Atom) -> None:
    if atom.role == "open":
        open_tags.append(atom)
    elif atom.role == "close" and open_tags and open_tags[-1].name == atom.name:
        open_tags.pop()


def _absorb_closers(
    atoms: list[_Atom], end: int, open_tags: list[_Atom]
) -> tuple[int, list[_Atom]]:
    """Take closing tags right after the cut into this chunk (they cost nothing)."""
    while end < len(atoms) and atoms[end].role == "close" and open_tags:
        if open_tags[-1].name != atoms[end].name:
            break
        open_tags = open_tags[:-1]
        end += 1
    return end, open_tags


def _skip_breaks(atoms: list[_Atom], index: int, open_tags: list[_Atom]) -> int:
    """Drop the break a cut falls on, and (outside code) the blank space after it."""
    if index < len(atoms) and atoms[index].text in ("\n", " "):
        index += 1
    if any(a.name in ("pre", "code") for a in open_tags):
        return index
    while index < len(atoms) and atoms[index].text in ("\n", " "):
        index += 1
    return index


class TelegramRenderer:
    """Markdown → Telegram HTML, chunked without breaking tags, stripped on rejection."""

    def render(self, markdown: str) -> str:
        return render_markdown(markdown, TelegramHtml())

    def chunk(self, text: str, limit: int, unit: LengthUnit) -> list[str]:
        return chunk_html(text, limit, unit)

    def plain(self, chunk: str) -> str:
        return html_to_plain(chunk)
