"""Telegram ``parse_mode`` parsing: HTML, MarkdownV2 and legacy Markdown into text + entities.

Mirrors what the Bot API accepts and the error texts it gives (after the common prefix
``Bad Request: can't parse entities: ``). Entity offsets and lengths are in UTF-16 code units,
as on the wire; error offsets are UTF-8 byte offsets, as Telegram reports them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]

HTML_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
    "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
    "tg-spoiler": "spoiler", "span": "spoiler", "a": "text_link", "code": "code", "pre": "pre",
    "blockquote": "blockquote", "tg-emoji": "custom_emoji",
}  # fmt: skip
MD2_RESERVED = set("_*[]()~`>#+-=|{}.!\\")
MD2_MARKERS = {"*": "bold", "_": "italic", "__": "underline", "~": "strikethrough", "||": "spoiler"}
_ATTR = re.compile(r"""\s*([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


class MarkupError(ValueError):
    """Malformed markup; ``str()`` is the Bot API description after the common prefix."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse(text: str, parse_mode: str | None) -> tuple[str, list[Json]]:
    """Plain text and entities for ``text`` in ``parse_mode`` (``None`` = plain)."""
    mode = (parse_mode or "").lower()
    if mode == "html":
        return _Html(text).run()
    if mode == "markdownv2":
        return _MarkdownV2(text).run()
    if mode == "markdown":
        return _legacy_markdown(text)
    if mode:
        raise MarkupError(f"Unsupported parse_mode {parse_mode!r}")
    return text, []


@dataclass
class _Output:
    """Plain text being built, with the UTF-16 position of its end."""

    parts: list[str] = field(default_factory=list)
    pos: int = 0
    entities: list[Json] = field(default_factory=list)

    def add(self, s: str) -> None:
        self.parts.append(s)
        self.pos += utf16_len(s)

    def entity(self, kind: str, start: int, **extra: Any) -> None:
        if self.pos > start:
            self.entities.append(
                {"type": kind, "offset": start, "length": self.pos - start, **extra}
            )

    def result(self) -> tuple[str, list[Json]]:
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return "".join(self.parts), self.entities


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


class _Html:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out = _Output()
        self.open: list[tuple[str, int, Json]] = []  # tag, start position, entity extras

    def run(self) -> tuple[str, list[Json]]:
        i = 0
        while i < len(self.text):
            i = self._step(i)
        if self.open:
            raise MarkupError(
                f'Can\'t find end tag corresponding to start tag "{self.open[-1][0]}"'
            )
        return self.out.result()

    def _step(self, i: int) -> int:
        ch = self.text[i]
        if ch == "&":
            # numeric entities and only &lt; &gt; &amp; &quot; (others stay literal text)
            m = re.match(r"&(#\d+|#x[0-9a-fA-F]+|lt|gt|amp|quot);", self.text[i:])
            if m:
                self.out.add(html.unescape(m.group(0)))
                return i + len(m.group(0))
        if ch != "<":
            self.out.add(ch)
            return i + 1
        end = self.text.find(">", i)
        if end < 0:
            raise MarkupError(f"Unclosed start tag at byte offset {_byte_offset(self.text, i)}")
        if self.text.startswith("</", i):
            self._end_tag(i, self.text[i + 2 : end].strip().lower())
        else:
            self._start_tag(i, self.text[i + 1 : end])
        return end + 1

    def _start_tag(self, i: int, body: str) -> None:
        name = re.match(r"[a-zA-Z-]*", body)
        tag = name.group(0).lower() if name else ""
        attrs = {m.group(1).lower(): m.group(2) or m.group(3) or m.group(4) or "" for m in
                 _ATTR.finditer(body[len(tag):])}  # fmt: skip
        if tag not in HTML_TAGS or (tag == "span" and attrs.get("class") != "tg-spoiler"):
            at = _byte_offset(self.text, i)
            raise MarkupError(f'Unsupported start tag "{tag}" at byte offset {at}')
        if tag == "blockquote" and re.search(r"\bexpandable\b", body):
            tag = "blockquote expandable"
        self.open.append((tag, self.out.pos, self._extras(tag, attrs)))

    def _extras(self, tag: str, attrs: dict[str, str]) -> Json:
        if tag == "a":
            return {"url": attrs.get("href", "")}
        if tag == "code" and attrs.get("class", "").startswith("language-"):
            return {"language": attrs["class"].removeprefix("language-")}
        if tag == "tg-emoji":
            return {"custom_emoji_id": attrs.get("emoji-id", "")}
        return {}

    def _end_tag(self, i: int, tag: str) -> None:
        at = _byte_offset(self.text, i)
        if not self.open:
            raise MarkupError(f"Unexpected end tag at byte offset {at}")
        open_tag, start, extras = self.open.pop()
        if open_tag.split()[0] != tag:
            raise MarkupError(
                f'Unmatched end tag at byte offset {at}, expected "</{open_tag}>", found "</{tag}>"'
            )
        self._close(open_tag, start, extras)

    def _close(self, tag: str, start: int, extras: Json) -> None:
        kind = "expandable_blockquote" if tag == "blockquote expandable" else HTML_TAGS[tag]
        if tag == "code" and self.open and self.open[-1][0] == "pre":
            self.open[-1][2].update(extras)  # <pre><code class="language-x"> is one pre entity
            return
        self.out.entity(kind, start, **extras)


class _MarkdownV2:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out = _Output()
        self.open: list[tuple[str, int, int]] = []  # marker, output position, source index

    def run(self) -> tuple[str, list[Json]]:
        i = 0
        while i < len(self.text):
            i = self._step(i)
        if self.open:
            marker, _, src = self.open[-1]
            kind = "TextUrl" if marker == "[" else _title(MD2_MARKERS[marker])
            raise MarkupError(
                f"Can't find end of {kind} entity at byte offset {_byte_offset(self.text, src)}"
            )
        return self.out.result()

    def _step(self, i: int) -> int:
        ch, text = self.text[i], self.text
        if ch == "\\" and i + 1 < len(text):
            self.out.add(text[i + 1])
            return i + 2
        if ch == "`":
            return self._code(i)
        if ch == "[":
            self.open.append(("[", self.out.pos, i))
            return i + 1
        if ch == "]" and self.open and self.open[-1][0] == "[":
            return self._link_end(i)
        marker = text[i : i + 2] if text[i : i + 2] in ("__", "||") else ch
        if marker in MD2_MARKERS:
            self._toggle(marker, i)
            return i + len(marker)
        if ch == ">" and (i == 0 or text[i - 1] == "\n"):
            return self._quote(i)
        if ch in MD2_RESERVED:
            raise MarkupError(
                f"Character '{ch}' is reserved and must be escaped with the preceding '\\'"
            )
        self.out.add(ch)
        return i + 1

    def _toggle(self, marker: str, i: int) -> None:
        for depth in range(len(self.open) - 1, -1, -1):
            if self.open[depth][0] == marker:
                _, start, _ = self.open.pop(depth)
                self.out.entity(MD2_MARKERS[marker], start)
                return
        self.open.append((marker, self.out.pos, i))

    def _code(self, i: int) -> int:
        fence = "```" if self.text.startswith("```", i) else "`"
        end = self.text.find(fence, i + len(fence))
        if end < 0:
            kind = "Pre" if fence == "```" else "Code"
            at = _byte_offset(self.text, i)
            raise MarkupError(f"Can't find end of {kind} entity at byte offset {at}")
        body = re.sub(r"\\([`\\])", r"\1", self.text[i + len(fence) : end])
        start, extras = self.out.pos, {}
        if fence == "```":
            first, _, rest = body.partition("\n")
            if rest and first and " " not in first:
                body, extras = rest, {"language": first}
        self.out.add(body)
        self.out.entity("pre" if fence == "```" else "code", start, **extras)
        return end + len(fence)

    def _link_end(self, i: int) -> int:
        _, start, src = self.open.pop()
        if not self.text.startswith("(", i + 1):
            at = _byte_offset(self.text, src)
            raise MarkupError(f"Can't find end of a TextUrl entity at byte offset {at}")
        end = self.text.find(")", i + 2)
        while end > 0 and self.text[end - 1] == "\\":
            end = self.text.find(")", end + 1)
        if end < 0:
            at = _byte_offset(self.text, src)
            raise MarkupError(f"Can't find end of a URL at byte offset {at}")
        url = re.sub(r"\\([)\\])", r"\1", self.text[i + 2 : end])
        self.out.entity("text_link", start, url=url)
        return end + 1

    def _quote(self, i: int) -> int:
        end = self.text.find("\n", i)
        end = len(self.text) if end < 0 else end
        start = self.out.pos
        inner = _MarkdownV2(self.text[i + 1 : end])
        text, entities = inner.run()
        for e in entities:
            self.out.entities.append({**e, "offset": e["offset"] + start})
        self.out.add(text)
        self.out.entity("blockquote", start)
        return end


def _title(kind: str) -> str:
    return kind[:1].upper() + kind[1:]


def _legacy_markdown(text: str) -> tuple[str, list[Json]]:
    out, i = _Output(), 0
    kinds = {"*": "bold", "_": "italic", "`": "code"}
    while i < len(text):
        ch = text[i]
        if ch in kinds:
            end = text.find(ch, i + 1)
            if end < 0:
                at = _byte_offset(text, i)
                raise MarkupError(f"Can't find end of the entity starting at byte offset {at}")
            start = out.pos
            out.add(text[i + 1 : end])
            out.entity(kinds[ch], start)
            i = end + 1
            continue
        out.add(ch)
        i += 1
    return out.result()
