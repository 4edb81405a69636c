"""A real engine for benchmarks: SQLite store in a temporary directory, the model host,
the OpenAI client over 127.0.0.1, real hooks, tools and approvals."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.model_host import TOOL_NAME, ModelHost
from core.agent.loop import CommonAgent
from core.agent.profile import AgentProfile
from core.approvals import Approvals
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.model.retry import RetryPolicy
from core.store.sqlite import SqliteStore, open_store
from core.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from core.types import ToolSpec

MODEL = "bench-model"
CLIENT_TIMEOUT = 60.0
"""Generous: the dispatcher benchmark queues hundreds of requests for httpx's pool."""


@dataclass(frozen=True, slots=True)
class Engine:
    host: ModelHost
    store: SqliteStore
    client: OpenAIClient
    agent: CommonAgent


async def _echo(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(f"echo:{args.get('text', '')}")


def echo_tool() -> Tool:
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    return Tool(ToolSpec(TOOL_NAME, "Echo the text back.", parameters), _echo)


def client_for(host: ModelHost) -> OpenAIClient:
    return OpenAIClient(base_url=host.url, model=MODEL, timeout=CLIENT_TIMEOUT, trust_env=False)


@asynccontextmanager
async def scratch_store() -> AsyncIterator[SqliteStore]:
    """A fresh store in a temporary directory, closed and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as folder:
        store = await open_store(Path(folder) / "store.db")
        try:
            yield store
        finally:
            await store.close()


@asynccontextmanager
async def engine(*, stream: bool = False) -> AsyncIterator[Engine]:
    """Everything a turn needs, torn down in reverse order."""
    async with AsyncExitStack() as stack:
        host = await stack.enter_async_context(ModelHost())
        store = await stack.enter_async_context(scratch_store())
        client = client_for(host)
        stack.push_async_callback(client.aclose)
        approvals = Approvals(store, None)
        stack.push_async_callback(approvals.aclose)
        yield Engine(host, store, client, _agent(store, client, approvals, stream))


def _agent(
    store: SqliteStore, client: OpenAIClient, approvals: Approvals, stream: bool
) -> CommonAgent:
    workspace = Path(store.path).parent
    profile = AgentProfile(name="bench", model=MODEL, workspace=workspace, stream=stream)
    retry = RetryPolicy(max_attempts=1)
    tools = ToolRegistry([echo_tool()])
    return CommonAgent(store, client, tools, HookRegistry(), approvals, profile, retry=retry)
