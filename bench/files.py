"""File-tool cost: the real ``read_file``/``write_file`` handlers on a path three
components deep, and what opening beneath the workspace (one ``openat`` per component, no
symlink followed, ``fstat`` of the result; :mod:`core.tools.beneath`) costs against one
plain ``open`` of the same path, both without the hop to the file thread.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.figures import Row, percentile, print_table, sample
from bench.sizes import Sizes
from core.cancellation import CancellationToken
from core.tools.base import Tool, ToolContext
from core.tools.beneath import open_regular
from core.tools.files import read_file_tool, write_file_tool
from core.tools.sandbox import Workspaces

PATH = "src/pkg/config.toml"


async def run(sizes: Sizes) -> None:
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as scratch:
        spaces = Workspaces(Path(scratch))
        context = ToolContext("bench:dm:1", "s", "t", "c", CancellationToken(), spaces.root)
        written = {"path": PATH, "content": "x" * 1000}
        cases = [
            ("read_file (handler to result)", read_file_tool(workspaces=spaces), {"path": PATH}),
            ("write_file, 1 kB (handler to result)", write_file_tool(workspaces=spaces), written),
        ]
        await cases[1][1].handler(written, context)
        rows = [await _row(what, tool, args, context, sizes) for what, tool, args in cases]
        workspace = spaces.path_for(context.session_key)
        notes = [
            _open_note("open beneath", lambda: open_regular(workspace, PATH, os.O_RDONLY), sizes),
            _open_note("plain open", lambda: os.open(workspace / PATH, os.O_RDONLY), sizes),
        ]
    print_table("file tools per call", rows, notes)


async def _row(
    what: str, tool: Tool, args: dict[str, Any], context: ToolContext, sizes: Sizes
) -> Row:
    async def call(_: int) -> None:
        result = await tool.handler(args, context)
        assert not result.is_error, result.text

    return await sample(what, call, sizes.file_calls, traced=sizes.file_calls // 10)


def _open_note(what: str, opening: Callable[[], int], sizes: Sizes) -> str:
    """p50 and p95, in µs, of ``opening`` (then closing) the file, on this thread."""
    took: list[float] = []
    for _ in range(sizes.file_calls):
        began = time.perf_counter()
        os.close(opening())
        took.append((time.perf_counter() - began) * 1e6)
    p50, p95 = percentile(took, 0.5), percentile(took, 0.95)
    return f"{what} of {PATH} (no thread hop): p50 {p50:.1f} µs, p95 {p95:.1f} µs"
