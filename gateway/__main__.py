"""``python -m gateway`` is the ``commonos`` command."""

from gateway.cli import main

raise SystemExit(main())
