"""Slack (the adapter comes with its own issue; its config section and renderer live here)."""
