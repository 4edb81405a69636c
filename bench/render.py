"""Renderer: a long Markdown reply to Telegram HTML, cut to Telegram's 4096 UTF-16 limit."""

from __future__ import annotations

from adapters.telegram.render import TelegramRenderer
from bench.figures import print_table, sample
from bench.sizes import Sizes

TELEGRAM_LIMIT = 4096
TARGET_CHARS = 5000

SECTION = """## Step {n}: check the *build* and **tests**

Run `make test` first; see [the guide](https://example.org/guide/{n}) for details.

- item one with `inline code` and _emphasis_
- item two, with a [link](https://example.org/{n}) & an <angle> bracket
  - a nested item

```python
def step_{n}(values: list[int]) -> int:
    total = 0
    for value in values:  # a <comment> & more
        total += value * {n}
    return total
```

> A quoted remark about step {n}.

"""


def sample_markdown(chars: int = TARGET_CHARS) -> str:
    """Markdown of about ``chars`` characters: headings, lists, links, quotes, code fences."""
    parts: list[str] = []
    number = 0
    while sum(map(len, parts)) < chars:
        number += 1
        parts.append(SECTION.format(n=number))
    return "".join(parts)[: chars - 1].rstrip() + "\n"


async def run(sizes: Sizes) -> None:
    renderer = TelegramRenderer()
    markdown = sample_markdown()
    chunks: list[int] = []

    async def render_and_chunk(index: int) -> None:
        chunks.append(len(renderer.chunk(renderer.render(markdown), TELEGRAM_LIMIT, "utf16")))

    what = f"render + chunk {len(markdown)} chars"
    row = await sample(what, render_and_chunk, sizes.renders, traced=10, unit="reply")
    rendered = renderer.render(markdown)
    visible = len(renderer.plain(rendered))
    note = (
        f"telegram_html: {len(rendered)} chars of HTML, ~{visible} visible;"
        f" limit {TELEGRAM_LIMIT} utf16 (visible text) -> {chunks[-1]} chunk(s)"
    )
    print_table("renderer (gateway.render)", [row], [note])
