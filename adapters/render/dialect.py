"""What a markup dialect says for each Markdown construct (the walker asks, it answers),
and what a platform's renderer does with a whole reply."""

from __future__ import annotations

from typing import Protocol

from adapters.render.units import LengthUnit


class Dialect(Protocol):
    def text(self, text: str) -> str:
        """Literal text, escaped as the dialect needs."""
        ...

    def bold(self, inner: str) -> str: ...

    def italic(self, inner: str) -> str: ...

    def strike(self, inner: str) -> str: ...

    def code(self, literal: str) -> str:
        """Inline code; ``literal`` is unescaped."""
        ...

    def pre(self, literal: str, language: str | None) -> str:
        """A code block; ``literal`` is unescaped."""
        ...

    def link(self, href: str, inner: str) -> str: ...

    def quote(self, inner: str) -> str: ...


class Renderer(Protocol):
    """How one platform shows a Markdown reply.

    * ``render(markdown)`` → text in the platform's markup (built from markdown-it-py's
      syntax tree, never by regex substitution);
    * ``chunk(text, limit, unit)`` → pieces that each fit ``limit`` counted in ``unit``
      and each stand alone as valid markup (a code block cut in two is closed and
      reopened);
    * ``plain(chunk)`` → the chunk with the markup stripped: the fallback a sender uses
      when the platform rejects the markup.
    """

    def render(self, markdown: str) -> str: ...

    def chunk(self, text: str, limit: int, unit: LengthUnit) -> list[str]: ...

    def plain(self, chunk: str) -> str: ...
