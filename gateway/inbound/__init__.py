"""The inbound edge: every event an adapter delivers passes one fold of named stages
(:mod:`gateway.inbound.stages`)."""
