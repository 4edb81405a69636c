"""The gateway: the composition of core and the platform adapters (docs/architecture.md).

Importing it keeps httpx's command line from loading. httpx imports ``httpx._main``
(click, pygments) whenever click is installed, which the MCP SDK's dependencies do, and
takes a failed import for "the CLI extras are not installed". The gateway never runs that
command line; loading it cost about 1 MiB and 20 ms of every start (README "Benchmarks",
``edges``). A process that has imported httpx already is left as it is.
"""

import sys

if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # its import fails
