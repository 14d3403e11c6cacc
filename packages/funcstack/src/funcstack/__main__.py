"""``python -m funcstack``: the ``funcstack`` command."""

from funcstack.cli import main

raise SystemExit(main())
