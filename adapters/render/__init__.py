"""Rendering a Markdown reply for a platform, and cutting it to the platform's limit.

Each adapter declares its :class:`Renderer` in its ``Capabilities``; the gateway only
calls it. The Markdown parsing is shared (:mod:`adapters.render.markdown`: one walk over
markdown-it-py's tree emitting through a :class:`Dialect`); a platform contributes its
dialect, its chunker and its plain-text fallback. Importing this package is cheap:
markdown-it-py is loaded when a renderer is first built.
"""

from adapters.render.dialect import Dialect, Renderer
from adapters.render.units import LengthUnit, measure

__all__ = ["Dialect", "LengthUnit", "Renderer", "measure"]
