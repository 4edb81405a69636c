"""Tools: specs plus async handlers, each declaring ``risk`` and ``interactive``."""
