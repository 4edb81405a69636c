"""A fifth platform, defined outside the gateway: one package, one registration (issue 29)."""
