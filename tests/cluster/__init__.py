"""Tests of the cluster primitives and the processes sharing one PostgreSQL store."""
