"""Shared fixtures: platform simulators and the scripted model server."""

pytest_plugins = ["tests.platform_sim.pytest_plugin", "tests.support.fixtures"]
