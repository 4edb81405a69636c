"""The built-in web chat: a browser conversation as a chat platform (see ``adapter.py``).

Importing the package is cheap (the config loader reads ``platform.py``); the names below
load aiohttp on first use.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "WebAdapter": "adapters.web.adapter",
    "WebSettings": "adapters.web.adapter",
    "WebMessage": "adapters.web.inbox",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
