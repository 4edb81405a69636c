"""Shared fixtures: platform simulators and the scripted model server; and compiled bytecode
for the Python processes the tests start.

The suite starts a few hundred Python processes (``python -m gateway run``, the
``commonos`` commands, the workers of ``pytest -n``). With ``PYTHONDONTWRITEBYTECODE`` set
(as here, and in many CI images) each of them compiled every source it imported whose
``__pycache__`` was missing or older than the source: about a quarter of a gateway's start-up
CPU. Their environment, inherited from this one, now caches bytecode in
:data:`PYCACHE` (``PYTHONPYCACHEPREFIX``: outside the checkout), compiled once per source
version and shared by every process of the run (and the next runs).
"""

import os
import tempfile
from pathlib import Path

PYCACHE = Path(tempfile.gettempdir()) / "commonos-tests-pycache"

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))

pytest_plugins = ["tests.platform_sim.pytest_plugin", "tests.support.fixtures"]
