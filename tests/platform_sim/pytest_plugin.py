"""Fixtures for the platform simulators (filled in by the simulator work)."""
