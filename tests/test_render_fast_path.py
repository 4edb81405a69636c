"""A short plain reply skips the Markdown parse and the chunkers' per-line and per-character
work (issue 29 point 4) and comes out byte-identical: each fast path is checked against
the full path on seeded random texts mixing plain words with every marker it must leave to
the full path."""

from __future__ import annotations

import random

import pytest

from adapters.discord.render import DiscordMarkdown
from adapters.render.chunk_text import chunk_lines, chunk_text
from adapters.render.dialect import Dialect
from adapters.render.markdown import PLAIN_LINE, render_markdown, walk_markdown
from adapters.render.plain import PlainText
from adapters.render.units import LengthUnit
from adapters.telegram.render import TelegramHtml, chunk_atoms, chunk_html

WORDS = "ab Zé1 ,.!?'\":;()/-_9½#%@+=$"
MARKERS = "aZé1 ,.!?'\":;()/-_*#>|\t\n&<`~[]\\=+ßЖ9²\u00a0"
PIECES = (
    "a",
    "b",
    " ",
    "\n",
    "é",
    "😀",
    "```",
    "~~~",
    "\t",
    "xxxxx",
    "<b>",
    "</b>",
    "&amp;",
    "&",
    "<",
)
UNITS: tuple[LengthUnit, ...] = ("utf16", "codepoints", "bytes")
DIALECTS: tuple[Dialect, ...] = (PlainText(), TelegramHtml(), DiscordMarkdown())


def texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(rng.choice((WORDS, MARKERS))) for _ in range(rng.randint(0, 14)))
        for _ in range(count)
    ]


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: type(d).__name__)
def test_a_plain_line_renders_as_the_walk_renders_it(dialect: Dialect) -> None:
    plain = [t for t in texts(29, 6000) if PLAIN_LINE.fullmatch(t)]
    assert len(plain) > 300  # the fast path is taken often enough to mean something
    for text in plain:
        assert render_markdown(text, dialect) == walk_markdown(text, dialect), text


NOT_PLAIN = ["1. one", "- item", "+ item", "# head", "> quote", "a_b_", "a *b*", "    code"]


@pytest.mark.parametrize("text", [*NOT_PLAIN, "a\nb", "&amp;"])
def test_markdown_is_never_taken_for_a_plain_line(text: str) -> None:
    assert not PLAIN_LINE.fullmatch(text)


def test_a_short_text_is_chunked_as_line_by_line_and_atom_by_atom() -> None:
    rng = random.Random(29)
    for _ in range(4000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        limit, unit = rng.randint(1, 30), rng.choice(UNITS)
        for fences in (True, False):
            expected = chunk_lines(text, limit, unit, fences=fences)
            assert chunk_text(text, limit, unit, fences=fences) == expected, (text, limit)
        assert chunk_html(text, limit, unit) == chunk_atoms(text, limit, unit), (text, limit)


def test_a_two_word_answer_is_one_chunk() -> None:
    assert chunk_html("Hello there ", 4096, "utf16") == ["Hello there"]
    assert chunk_text("Hello there", 2000, "codepoints") == ["Hello there"]
    assert render_markdown("Hello there", TelegramHtml()) == "Hello there"
