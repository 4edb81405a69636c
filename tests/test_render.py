"""Markdown → each platform's markup, plain text, and chunking to the platform's limit."""

from __future__ import annotations

import random

import pytest

from adapters.render import measure
from adapters.render.chunk_text import chunk_text
from adapters.render.markdown import CommonMarkRenderer, render_plain
from adapters.render.units import MOST_PER_CHARACTER
from adapters.slack.render import slack_renderer
from adapters.telegram.render import TelegramRenderer, chunk_html
from tests.platform_sim.telegram_markup import parse, utf16_len


def visible(markup: str) -> tuple[str, list[dict[str, object]]]:
    """What Telegram shows for our HTML (raises if Telegram would reject it)."""
    return parse(markup, "HTML")


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold** and *italic*", "<b>bold</b> and <i>italic</i>"),
        ("~~gone~~ `x < y`", "<s>gone</s> <code>x &lt; y</code>"),
        ("[docs](https://e.com/?a=1&b=2)", '<a href="https://e.com/?a=1&amp;b=2">docs</a>'),
        ("# Title\n\ntext", "<b>Title</b>\n\ntext"),
        ("- one\n- two", "• one\n• two"),
        ("3. three\n4. four", "3. three\n4. four"),
        ("> quoted **word**", "<blockquote>quoted <b>word</b></blockquote>"),
        (
            "```py\nif a < b:\n    pass\n```",
            '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>',
        ),
        ("```\nplain\n```", "<pre>plain</pre>"),
        ("a <b>raw</b> & co", "a &lt;b&gt;raw&lt;/b&gt; &amp; co"),
        ("[rel](foo/bar)", "rel"),
    ],
)
def test_markdown_constructs_render_to_exact_telegram_html(markdown: str, html: str) -> None:
    assert TelegramRenderer().render(markdown) == html


def test_table_renders_as_aligned_preformatted_block() -> None:
    html = TelegramRenderer().render("| a | bb |\n|---|---|\n| 1 | 2 |")
    assert html == "<pre>a | bb\n--+---\n1 | 2</pre>"


def test_nested_list_is_indented_under_its_item() -> None:
    assert TelegramRenderer().render("- a\n  - b\n- c") == "• a\n  • b\n• c"


@pytest.mark.parametrize(
    "markdown",
    [
        "**unclosed bold and `unclosed code",
        "```python\nnever closed <tag> & stuff",
        "*a **b* c** [x](",
        "<div>html block</div>\n\n<script>alert(1)</script>",
        "> quote\n>> nested\n> > > deeper **b**",
        "| broken | table\n|---\n| x",
        "&amp; &lt; &#x1F600; &bogus;",
    ],
)
def test_malformed_markdown_still_renders_html_telegram_accepts(markdown: str) -> None:
    text, _ = visible(TelegramRenderer().render(markdown))
    assert text.strip()


def test_escaped_text_reads_back_exactly() -> None:
    text, entities = visible(TelegramRenderer().render("if x < 3 && y > 2: `a<b>`"))
    assert text == "if x < 3 && y > 2: a<b>"
    assert entities == [{"type": "code", "offset": 19, "length": 4}]


def test_plain_renderer_strips_markup_and_keeps_words() -> None:
    plain = render_plain("# T\n\n**b** [l](https://x.io) `c`\n\n```sh\nls\n```")
    assert plain == "T\n\nb l (https://x.io) c\n\nls"


def test_emoji_and_astral_characters_count_two_utf16_units() -> None:
    assert measure("😀", "utf16") == 2
    assert measure("a😀𝄞", "utf16") == 5
    assert measure("😀", "codepoints") == 1
    assert measure("é", "bytes") == 2


def five_thousand_char_reply() -> str:
    code = "\n".join(f"value_{i:03d} = compute({i})  # step {i}" for i in range(140))
    return "Here is the script:\n\n```python\n" + code + "\n```\n\nRun it with care."


def test_long_reply_with_code_splits_in_two_chunks_with_fence_reopened() -> None:
    reply = five_thousand_char_reply()
    assert 4500 < len(reply) < 5500
    renderer = TelegramRenderer()
    chunks = renderer.chunk(renderer.render(reply), 4096, "utf16")
    assert len(chunks) == 2
    for chunk in chunks:
        text, entities = visible(chunk)
        assert utf16_len(text) <= 4096
        assert any(e["type"] == "pre" and e.get("language") == "python" for e in entities)
    assert chunks[0].endswith("</code></pre>")
    assert chunks[1].startswith('<pre><code class="language-python">')
    joined = visible(chunks[0])[0] + "\n" + visible(chunks[1])[0]
    assert "value_139 = compute(139)" in joined and joined.endswith("Run it with care.")


def test_chunk_limit_counts_astral_characters_as_two_units() -> None:
    chunks = chunk_html("😀" * 10, 9, "utf16")
    assert [utf16_len(visible(c)[0]) for c in chunks] == [8, 8, 4]


def test_chunking_never_cuts_a_tag_or_an_entity() -> None:
    markup = "<b>" + "a&amp;b " * 50 + "</b>"
    for limit in (7, 10, 33):
        chunks = chunk_html(markup, limit, "utf16")
        for chunk in chunks:
            text, entities = visible(chunk)
            assert utf16_len(text) <= limit
            assert entities[0]["type"] == "bold"
        assert "".join(visible(c)[0] for c in chunks).replace(" ", "") == "a&b" * 50


def test_markdown_chunks_close_and_reopen_code_fence_with_language() -> None:
    source = "intro\n```rust\n" + "\n".join(f"let x{i} = {i};" for i in range(300)) + "\n```"
    chunks = chunk_text(source, 2000, "codepoints")
    assert len(chunks) >= 2
    for chunk in chunks:
        assert len(chunk) <= 2000
        assert chunk.count("```") % 2 == 0
    assert all(c.split("\n")[0] == "```rust" for c in chunks[1:])


def test_plain_fallback_of_a_chunk_is_its_visible_text() -> None:
    renderer = TelegramRenderer()
    chunk = renderer.render("**a** < `b` & [c](https://c.io)")
    assert renderer.plain(chunk) == visible(chunk)[0] == "a < b & c"


def test_slack_mrkdwn_dialect() -> None:
    renderer = slack_renderer()
    rendered = renderer.render("**b** *i* ~~s~~ [docs](https://d.io) a<b & `x`")
    assert rendered == "*b* _i_ ~s~ <https://d.io|docs> a&lt;b &amp; `x`"


def test_discord_markdown_passes_through_and_chunks_on_lines() -> None:
    renderer = CommonMarkRenderer()
    reply = "**keep** this\n" + "line\n" * 600
    chunks = renderer.chunk(renderer.render(reply), 2000, "codepoints")
    assert chunks[0].startswith("**keep** this") and all(len(c) <= 2000 for c in chunks)


FUZZ_PIECES = [*"ab *_~`[]()<>&#>|-\n\n 1.😀\\!:/", "```", "```py\n", "http://x.io", "&amp;", "> "]


def test_random_markdown_always_renders_and_chunks_to_valid_html_losing_nothing() -> None:
    rng = random.Random(7)
    renderer = TelegramRenderer()
    for _ in range(300):
        source = "".join(rng.choice(FUZZ_PIECES) for _ in range(rng.randint(1, 150)))
        markup = renderer.render(source)
        if not markup.strip():
            continue
        whole = "".join(visible(markup)[0].split())
        for limit in (5, 17, 40):
            chunks = [visible(c)[0] for c in renderer.chunk(markup, limit, "utf16")]
            assert all(0 < utf16_len(c) <= limit for c in chunks)
            assert "".join("".join(c.split()) for c in chunks) == whole


def test_code_block_inside_a_list_item_keeps_its_lines_byte_identical() -> None:
    code = "def f():\n    return 1\n\n  # two spaces"
    fenced = "\n".join("  " + line if line else "" for line in code.split("\n"))
    markdown = f"- run this:\n\n  ```\n{fenced}\n  ```\n- done"
    shown, _ = visible(TelegramRenderer().render(markdown))
    assert code in shown


def test_no_character_takes_more_units_than_the_short_reply_bound_allows() -> None:
    """A reply of n characters is taken to fit when n × MOST_PER_CHARACTER[unit] is within
    the limit, unmeasured (adapters/render/units.py): no character may exceed it."""
    widest = ["a", "é", "€", "😀", "\U0010ffff", "\u200d"]
    for unit, most in MOST_PER_CHARACTER.items():
        assert max(measure(character, unit) for character in widest) == most, unit
