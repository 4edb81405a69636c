"""Skills (issue 32, README "Skills"): folders an operator placed, each with a
``SKILL.md`` (YAML front matter ``name`` and ``description``, then the instructions) and
optional files beside it.

:mod:`core.skills.catalog` finds and validates them (a bad one is skipped with one
warning); :mod:`core.skills.index` writes their names and descriptions into the stable
prompt tier (capped); :mod:`core.skills.tool` is the ``skill(name)`` tool that loads a
body and lists its files, which the terminal reads through a read-only mount
(:data:`core.skills.catalog.SANDBOX_ROOT`). Nothing here runs a skill's files, and
nothing is fetched from a network.
"""
