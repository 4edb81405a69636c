"""Test support: the scripted model server and its fixtures."""
