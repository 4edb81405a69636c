"""``[mcp.servers.<name>]``: the MCP servers whose tools the agent gets (``core.mcp``).

A server is either **stdio** (``command``, ``args``, ``env``, ``directory``, ``network``,
``sandbox``) or **streamable HTTP** (``url``, ``headers``); both have ``enabled``,
``timeout_seconds`` (one call, default 120), ``startup_timeout_seconds`` (default 30),
``approval`` (``annotations``, ``always``, ``never``), ``scope`` (``process``: one server
shared by every session, the default; ``session``: one per session, stopped by ``/new``,
after ``session_idle_seconds`` without a call (600) or on shutdown, at most
``max_sessions`` (8) at once) and ``tools``: either an allow list of
globs (``tools = ["git_status", "git_log*"]``) or one table per tool
(``[mcp.servers.git.tools.git_commit] approval = "always"``, ``enabled = false`` to leave
one out); TOML cannot hold both forms under one key.

``${VAR}`` in ``args``, ``env``, ``url`` and ``headers`` is read from the gateway's
environment when the config is loaded (an unset one is a problem named by its key); header
values and every value that came from a variable are secrets, masked in logs and chats. A
profile names the servers it uses (``[profiles.<name>] mcp_servers``, default: all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from adapters.config import NAME, Flag, PositiveInt, PositiveNumber, Section, Text, choice
from adapters.config_reader import Check, ReadContext, got, hidden_field, invalid, show

if TYPE_CHECKING:
    from core.mcp.spec import ServerSpec

Approval = Literal["annotations", "always", "never"]
Scope = Literal["process", "session"]

APPROVALS = ("annotations", "always", "never")
SCOPES = ("process", "session")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, env: Mapping[str, str]) -> str:
    """``value`` with each ``${VAR}`` replaced from ``env``; an unset one is an error."""
    missing = [name for name in _VARIABLE.findall(value) if name not in env]
    if missing:
        raise invalid(f"the env var {missing[0]} is not set")
    return _VARIABLE.sub(lambda m: env[m.group(1)], value)


def _expanded(value: object, context: ReadContext) -> str:
    if not isinstance(value, str):
        raise invalid(f"expected a string, {got(value)}")
    return expand(value, context.env)


def _texts(value: object) -> object:
    if not isinstance(value, list | tuple):
        raise invalid(f"expected an array of strings, {got(value)}")
    return tuple(value)


def _strings(value: object) -> object:
    if not isinstance(value, dict):
        raise invalid(f"expected a table of strings, {got(value)}")
    return value


def _directory(value: object, context: ReadContext) -> Path:
    """A path; a relative one starts at the config file's directory."""
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"expected a non-empty string, {got(value)}")
    base = context.base_dir
    return (base / Path(value).expanduser()).resolve()


def _http_url(value: object, context: ReadContext) -> str:
    url = _expanded(value, context)
    if not url.startswith(("http://", "https://")):
        raise invalid(f"expected an http:// or https:// URL, got {show(value)}")
    return url


Expanded = Annotated[str, Check(_expanded)]
ExpandedTexts = Annotated[tuple[Expanded, ...], Check(_texts)]
ExpandedTable = Annotated[dict[str, Expanded], Check(_strings)]
ApprovalRule = Annotated[Approval, Check(choice(*APPROVALS))]
ScopeRule = Annotated[Scope, Check(choice(*SCOPES))]


class McpToolSection(Section):
    """``[mcp.servers.<server>.tools.<tool>]``."""

    approval: ApprovalRule | None = None
    """Default: the server's ``approval``."""
    enabled: Flag = True


def _tools(value: object) -> object:
    if isinstance(value, list | tuple):
        return {"allow": tuple(value)}
    if isinstance(value, dict):
        return {"each": value}
    raise invalid(f"expected an array of globs or a table per tool, {got(value)}")


class ToolRules(Section):
    allow: tuple[Text, ...] = ()
    each: dict[str, McpToolSection] = field(default_factory=dict)


class McpServerSection(Section):
    """``[mcp.servers.<name>]``."""

    command: Text | None = None
    args: ExpandedTexts = ()
    env: ExpandedTable = field(default_factory=dict)
    """The whole environment the server gets (besides the sandbox's PATH, HOME, ...)."""
    directory: Annotated[Path, Check(_directory)] | None = None
    """The server's working directory, the only one it may write. Default:
    ``<data_dir>/mcp/<name>``."""
    network: Flag = False
    sandbox: Flag = True
    url: Annotated[str, Check(_http_url)] | None = None
    headers: ExpandedTable = field(default_factory=dict)
    enabled: Flag = True
    timeout_seconds: PositiveNumber = 120.0
    startup_timeout_seconds: PositiveNumber = 30.0
    approval: ApprovalRule = "annotations"
    scope: ScopeRule = "process"
    """``process``: started once, shared by every session; ``session``: one per session."""
    session_idle_seconds: PositiveNumber = 600.0
    """``scope = "session"``: a session's server stops after this long without a call."""
    max_sessions: PositiveInt = 8
    """``scope = "session"``: per-session servers running at once, at most."""
    tools: Annotated[ToolRules, Check(_tools)] = field(default_factory=ToolRules)
    from_variables: tuple[str, ...] = hidden_field((), repr=False)
    """Where the file said ``${VAR}`` (``env.TOKEN``, ``args.2``, ``url``): secrets."""

    @classmethod
    def prepared(cls, data: dict[str, Any], context: ReadContext) -> dict[str, Any]:
        """Where the file said ``${VAR}``, before the values are expanded."""
        found = [
            where
            for where, value in _leaves(data, ("args", "env", "url"))
            if isinstance(value, str) and _VARIABLE.search(value)
        ]
        return {**data, "from_variables": tuple(found)}

    def problems(self) -> Iterator[tuple[str, str]]:
        if (self.command is None) == (self.url is None):
            yield "command", "set command (a stdio server) or url (streamable HTTP), not both"
        if self.url is not None:
            stdio = [k for k in ("args", "env", "directory") if getattr(self, k)]
            if stdio or self.network:
                yield (stdio or ["network"])[0], "only for a stdio server (command)"
        if self.command is not None and self.headers:
            yield "headers", "only for an HTTP server (url)"

    def spec(self, name: str, data_dir: Path) -> ServerSpec:
        """The engine's view of this server."""
        from core.mcp.spec import HttpServer, ServerSpec, StdioServer  # only when configured

        transport: StdioServer | HttpServer
        if self.url is not None:
            transport = HttpServer(self.url, dict(self.headers))
        else:
            assert self.command is not None
            directory = self.directory or data_dir / "mcp" / name
            transport = StdioServer(
                self.command, self.args, dict(self.env), directory, self.sandbox, self.network
            )
        rules = self.tools.each
        left_out = {tool for tool, rule in rules.items() if not rule.enabled}
        return ServerSpec(
            name=name,
            transport=transport,
            timeout=self.timeout_seconds,
            startup_timeout=self.startup_timeout_seconds,
            tools=self.tools.allow,
            approval=self.approval,
            tool_approvals={t: r.approval for t, r in rules.items() if r.approval is not None},
            left_out=frozenset(left_out),
            scope=self.scope,
            session_idle=self.session_idle_seconds,
            max_sessions=self.max_sessions,
        )

    def shown(self, mask: Callable[[str], str]) -> dict[str, object]:
        """The keys for ``check-config``: secrets through ``mask``, unset keys left out."""
        secrets = set(self.secrets())
        hidden = {"tools"}
        shown: dict[str, object] = {}
        for key in self.listed_keys():
            value = getattr(self, key)
            if key in hidden or value is None:
                continue
            if isinstance(value, dict):
                value = {k: mask(v) if v in secrets else v for k, v in value.items()}
            elif isinstance(value, tuple):
                value = tuple(mask(v) if v in secrets else v for v in value)
            elif isinstance(value, str) and value in secrets:
                value = mask(value)
            shown[key] = value
        if self.tools.allow:
            shown["tools"] = self.tools.allow
        return shown

    def secrets(self) -> list[str]:
        """Header values, and every value that came from a variable."""
        found = [v for v in self.headers.values() if v]
        for where in self.from_variables:
            key, _, part = where.partition(".")
            if key == "url" and self.url:
                found.append(self.url)
            elif key == "env" and part in self.env:
                found.append(self.env[part])
            elif key == "args" and part.isdigit() and int(part) < len(self.args):
                found.append(self.args[int(part)])
        return found


class McpSection(Section):
    """``[mcp]``: the servers, by name."""

    servers: dict[str, McpServerSection] = field(default_factory=dict)

    def problems(self) -> Iterator[tuple[str, str]]:
        for name in self.servers:
            if not NAME.match(name):
                yield f"servers.{name}", "expected a name of letters, digits, '_' or '-'"
        for name, server in self.servers.items():
            if server.enabled:
                for key, message in server.problems():
                    yield f"servers.{name}.{key}", message

    def enabled(self) -> dict[str, McpServerSection]:
        return {name: server for name, server in self.servers.items() if server.enabled}

    def specs(self, data_dir: Path, names: list[str] | None = None) -> list[ServerSpec]:
        """The enabled servers (or those of ``names``) for the engine."""
        chosen = self.enabled()
        return [s.spec(n, data_dir) for n, s in chosen.items() if names is None or n in names]

    def secrets(self) -> list[str]:
        found: list[str] = []
        for server in self.servers.values():
            found += server.secrets()
        return found


def _leaves(data: Mapping[str, Any], keys: tuple[str, ...]) -> Iterator[tuple[str, object]]:
    for key in keys:
        value = data.get(key)
        if isinstance(value, dict):
            yield from ((f"{key}.{k}", v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            yield from ((f"{key}.{i}", v) for i, v in enumerate(value))
        elif value is not None:
            yield key, value


def profile_problems(
    profiles: Mapping[str, tuple[str, ...] | None], section: McpSection
) -> Iterator[tuple[str, str]]:
    """``profiles.<name>.mcp_servers`` naming a server that is not configured."""
    known = sorted(section.servers)
    for profile, names in profiles.items():
        for name in names or ():
            if name not in section.servers:
                listed = ", ".join(known) or "none"
                yield (
                    f"profiles.{profile}.mcp_servers",
                    f'unknown MCP server "{name}"; configured: {listed}',
                )
