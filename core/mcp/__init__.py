"""MCP servers as the agent's tools (the official ``mcp`` SDK, imported only here).

A configured server (:class:`core.mcp.spec.ServerSpec`) is one supervised connection
(:mod:`core.mcp.connection`) over stdio, in the terminal's bubblewrap sandbox, or streamable
HTTP (:mod:`core.mcp.transport`); its tools enter every profile's registry that names it as
``mcp__<server>__<tool>`` (:mod:`core.mcp.names`, :mod:`core.mcp.tools`) and answer through
:mod:`core.mcp.results`; :class:`core.mcp.servers.McpServers` starts them once per process
and stops them. Nothing imports this package unless an ``[mcp]`` section configures a
server: a gateway without one never loads the SDK.
"""
