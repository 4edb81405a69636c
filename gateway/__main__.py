"""``python -m gateway`` is the ``commonos`` command."""

from gateway.cli.main import main

raise SystemExit(main())
