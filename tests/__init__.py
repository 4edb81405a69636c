"""Test support and test suites for CommonOS gateway."""
