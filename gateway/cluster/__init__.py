"""Several ``commonos run`` processes on one PostgreSQL store (docs/cluster.md)."""
