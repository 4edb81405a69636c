"""The built-in web chat: a browser conversation as a chat platform (see ``adapter.py``)."""

from adapters.web.adapter import WebAdapter, WebSettings
from adapters.web.inbox import WebMessage

__all__ = ["WebAdapter", "WebMessage", "WebSettings"]
