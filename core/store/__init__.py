"""Persistence: the ``Store`` port and its SQLite implementation."""
