"""The scripted model server in a child process, answering from what each request says.

The child (``python -m bench.model_host``) serves :class:`ScriptedModelServer` on
127.0.0.1, prints ``port <n>`` and then ``hang <index>`` for every request it holds. It
answers by the last message of each request:

* a tool result → ``reply_text("done")`` (the tool round trip is over);
* user text starting with ``/tool`` → one call of the ``bench_echo`` tool;
* user text starting with ``/hang`` → a reply held until the client goes away;
* anything else → a short text reply.

It exits when its stdin closes. :class:`ModelHost` is the parent's handle: start, the
base URL, an event per held request, and a bounded shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from types import TracebackType

from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)

TOOL_NAME = "bench_echo"
TEXT_REPLY = "ok, noted: the benchmark reply is a few words long."
START_SECONDS = 10.0
STOP_SECONDS = 5.0


def answer(request: ReceivedRequest, number: int) -> Reply:
    """The reply for ``request``, the ``number``-th one (see the module docstring)."""
    messages = request.messages
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return reply_text("done")
    text = request.last_user_text
    if text.startswith("/tool"):
        return reply_tool_call(TOOL_NAME, {"text": "x"}, id=f"call_{number}")
    if text.startswith("/hang"):
        print(f"hang {number}", flush=True)
        return reply_hang()
    return reply_text(TEXT_REPLY)


async def serve() -> None:
    numbers = itertools.count()
    async with ScriptedModelServer() as server:

        def respond(request: ReceivedRequest) -> Reply:
            server.script(respond)  # always exactly one pending item: itself
            server.requests.clear()  # a benchmark sends thousands; keep none
            return answer(request, next(numbers))

        server.script(respond)
        print(f"port {server.port}", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


class ModelHost:
    """The parent's handle on the child process (an async context manager)."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self.port = 0
        self.held = asyncio.Queue[int]()
        """Indexes of requests the child is holding, in arrival order."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> ModelHost:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.model_host",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            self.port = await asyncio.wait_for(self._read_port(), START_SECONDS)
        except BaseException:  # not swallowed: the child is reaped, then the error goes on
            self._process.kill()
            await self._process.wait()
            raise
        self._reader = asyncio.create_task(self._read_holds(), name="model-host-reader")
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            await self._reader  # ends at EOF, which the exit above guarantees

    async def _read_port(self) -> int:
        line = await self._line()
        if not line.startswith("port "):
            raise RuntimeError(f"model host did not start: {line!r}")
        return int(line.split()[1])

    async def _read_holds(self) -> None:
        while line := await self._line():
            if line.startswith("hang "):
                self.held.put_nowait(int(line.split()[1]))

    async def _line(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        return (await self._process.stdout.readline()).decode().strip()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
