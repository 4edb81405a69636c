"""Plain text: the Markdown's words with the markup stripped (no escaping needed)."""

from __future__ import annotations


class PlainText:
    def text(self, text: str) -> str:
        return text

    def bold(self, inner: str) -> str:
        return inner

    def italic(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def code(self, literal: str) -> str:
        return literal

    def pre(self, literal: str, language: str | None) -> str:
        return literal

    def link(self, href: str, inner: str) -> str:
        if not href or inner == href:
            return inner or href
        return f"{inner} ({href})"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
