"""Hooks: the spec (``spec.py``), decision values (``results.py``) and the async registry."""
