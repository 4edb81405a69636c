"""The turn loop (``CommonAgent.run_turn``) and what it needs per turn."""
