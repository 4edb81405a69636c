"""The engine of the CommonOS gateway (docs/architecture.md).

``__version__`` is the package's version, read by ``pyproject.toml`` when it is built:
``commonos --version`` and the model client's ``User-Agent`` name it without reading the
installed metadata (``importlib.metadata`` costs 2.6 MiB and 20 ms at start).
"""

__version__ = "0.1.0"
