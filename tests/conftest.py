"""Shared fixtures. Platform simulators come from ``tests.platform_sim.pytest_plugin``."""

pytest_plugins = ["tests.platform_sim.pytest_plugin"]
