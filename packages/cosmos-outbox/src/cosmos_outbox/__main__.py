"""`python -m cosmos_outbox`: the package's command line (`cosmos_outbox.cli`)."""

from __future__ import annotations

from cosmos_outbox.cli import main

raise SystemExit(main(prog="python -m cosmos_outbox"))
