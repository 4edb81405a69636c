"""What the terminal chat shows: printed messages, the live text of an answer being
written, and messages taken off the screen again.

Each message is printed as a block, ``"\\n" + text + "\\n"`` (a blank line before it). On
a terminal (``ansi``: the output is a TTY) the blocks printed since the person last
pressed Enter are remembered with the rows they take, so that:

* the live text of an answer (``LiveText``, :mod:`gateway.turns.live_text`) is written as it
  arrives — ``append`` adds to it in place, ``replace`` rewrites it (erased, written
  again) — and always stays the last thing on the screen: a message printed meanwhile (a
  notice) goes above it;
* once ``seal``-ed, the next message (the rendered answer) takes the live text's place:
  the answer is shown once;
* :meth:`Screen.remove` erases a message (the slow model's ⏳ notice when the answer comes)
  and writes the blocks printed after it again.

Erasing moves the cursor up over the rows to remove (``ESC [ n A``) and clears to the end
of the screen (``ESC [ J``); a block's rows are counted at the terminal's width (wide
characters count two). What the person typed is echoed by the terminal, not by us: a line
typed ends what can be erased (only what came after it can be), and so does a screen
scrolled past its height. Without a terminal (output to a file or pipe) nothing is erased
and no live text is written: the messages are printed as they come.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from dataclasses import dataclass
from typing import TextIO

from adapters.calls import LiveMode

UP_AND_CLEAR = "\r\x1b[{rows}A\x1b[J"
"""To column 0, ``rows`` rows up, clear from there to the end of the screen."""
REMEMBERED_BLOCKS = 50


@dataclass(slots=True)
class _Block:
    key: str | None
    """The message id (None: not removable on its own)."""
    text: str


def text_rows(text: str, width: int) -> int:
    """Rows ``text`` takes on a terminal ``width`` columns wide (at least one a line)."""
    return sum(max(1, -(-_cells(line) // width)) for line in text.split("\n"))


def _cells(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


class Screen:
    """The terminal's output (see the module docstring)."""

    def __init__(self, output: TextIO, *, ansi: bool | None = None, width: int | None = None):
        self._out = output
        self._ansi = _is_tty(output) if ansi is None else ansi
        self._width = width
        self._blocks: list[_Block] = []
        self._live: str | None = None
        self._sealed = False

    # messages ---------------------------------------------------------------------------
    def print(self, text: str, key: str | None = None) -> None:
        """A message (``key``: its id, for :meth:`remove`). A sealed live text is replaced
        by it; one still being written stays below it."""
        live, sealed = self._live, self._sealed
        self._take_live()
        self._write(f"\n{text}\n")
        self._remember(_Block(key, text))
        if live is not None and not sealed:
            self._show_live(live)

    def remove(self, key: str) -> None:
        """Erase the message ``key`` when it is still where it can be erased."""
        at = next((i for i, b in enumerate(self._blocks) if b.key == key), None)
        if at is None or not self._ansi:
            return
        live = self._live
        after = self._blocks[at + 1 :]
        if not self._erase(self._blocks[at:], live):
            return
        del self._blocks[at:]
        self._live = None
        for block in after:
            self._write(f"\n{block.text}\n")
            self._blocks.append(block)
        if live is not None:
            self._show_live(live)

    def typed(self) -> None:
        """The person pressed Enter: what was printed before can no longer be erased."""
        self._blocks.clear()
        if self._live is not None:
            self._live, self._sealed = None, False

    # live text --------------------------------------------------------------------------
    def live(self, text: str, mode: LiveMode) -> None:
        """One ``LiveText`` call (the module docstring); nothing without a terminal."""
        if not self._ansi:
            return
        if mode == "seal":
            self._sealed = self._live is not None
            return
        if self._sealed:  # a sealed text that no message replaced: a new answer starts
            self._live, self._sealed = None, False
        if mode == "append" and self._live is not None:
            self._write(text)
            self._live += text
            return
        whole = text if mode == "replace" else (self._live or "") + text
        self._take_live()
        if whole:
            self._show_live(whole)

    def _show_live(self, text: str) -> None:
        self._write(f"\n{text}")
        self._live = text

    def _take_live(self) -> None:
        """Erase the live text (if any)."""
        if self._live is not None and self._ansi:
            self._erase([], self._live)
        self._live, self._sealed = None, False

    # the terminal -------------------------------------------------------------------------
    def _erase(self, blocks: list[_Block], live: str | None) -> bool:
        """Erase ``blocks`` (the last ones printed) and the live text below them; False
        when they are no longer all on the screen."""
        width, height = self._size()
        rows = sum(1 + text_rows(b.text, width) for b in blocks)
        rows += text_rows(live, width) if live is not None else 0
        if rows >= height:
            return False
        self._write(UP_AND_CLEAR.format(rows=rows) if rows else "\r\x1b[J")
        return True

    def _remember(self, block: _Block) -> None:
        if not self._ansi:
            return
        self._blocks.append(block)
        del self._blocks[:-REMEMBERED_BLOCKS]

    def _size(self) -> tuple[int, int]:
        if self._width is not None:
            return self._width, 10_000
        try:
            size = os.get_terminal_size(self._out.fileno())
        except (OSError, ValueError, AttributeError):
            size = shutil.get_terminal_size()
        return size.columns or 80, size.lines or 24  # a pty never sized says 0 x 0

    def _write(self, data: str) -> None:
        self._out.write(data)
        self._out.flush()


def _is_tty(output: TextIO) -> bool:
    try:
        return output.isatty()
    except (AttributeError, ValueError):
        return False
