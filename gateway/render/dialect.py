"""What a markup dialect says for each Markdown construct (the walker asks, it answers)."""

from __future__ import annotations

from typing import Protocol


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
