"""Discord (the adapter comes with its own issue; the config section is declared here)."""
